"""Planning: cells, deduplicated model requests, and the versioned plan artifact."""
