"""What results say: comparisons between finders, per-pixel explanations, spectra, fits, caps."""
