"""Experiment runner for jaxclp: the paper's tables and figures from one command (``jaxclp --help``)."""
