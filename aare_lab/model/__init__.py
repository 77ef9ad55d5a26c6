"""The finder's model: its specification, parameters, branch codes and the result Dataset.

`spec` fixes a run, `results` is what a run gives (one xarray Dataset per finder run);
the rest are the vocabularies both share (cluster sizes, branch codes, CF flags, capacity,
int16 clipping, energy bins, labels).
"""
