"""Dark frames and what they say about a run: too few frames, bad pixels, photons, noisy frames.

`report` gathers them for ``aare-lab dark``; the finders and `find` warn with the same words.
"""
