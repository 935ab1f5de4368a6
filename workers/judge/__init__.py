"""The workers' comparison science: a run's outputs against its reference, explained, attributed."""
