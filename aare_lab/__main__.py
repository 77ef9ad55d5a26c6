from aare_lab.cli import entry

entry()
