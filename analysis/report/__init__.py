"""The report: configs against their baseline as tables (text, markdown, CSV, JSON, HTML) and plots."""
