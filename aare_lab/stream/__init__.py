"""The live stream: headless live runs, a publisher of slsReceiver's stream, captures to replay.

The stream's reader is a frame source (`aare_lab.sources.StreamSource`).
"""
