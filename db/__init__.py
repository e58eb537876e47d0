"""Storage: typed models, the async engine and the TaskStore."""
