"""Detector physics: the pedestal, common mode, JUNGFRAU gain switching, dark-frame quality."""
