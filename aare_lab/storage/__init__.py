"""Result files: written whole or visibly partial, never destroyed; their chunk encoding.

The model's files (results, pedestals, calibrations, maps) are written through here; storage
knows files, not what is in them.
"""
