"""How work runs on the host: thread pools, read-ahead, reused result memory, signals.

Nothing here knows about pixels or clusters; every other part of aare_lab may use it.
"""
