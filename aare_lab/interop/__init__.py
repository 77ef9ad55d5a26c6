"""Other tools' files: PSI aare's binary cluster files, written and read without aare."""
