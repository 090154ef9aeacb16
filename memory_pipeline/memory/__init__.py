"""The memory axis: importance, staleness per knowledge type, access frequency."""
