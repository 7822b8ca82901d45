"""specsweep analysis: load result facts, compare configs, report."""
