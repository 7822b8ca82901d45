"""The engines specsweep sweeps (contents owned by the engine interface work)."""
