"""The agent: a system prompt, six tools and the loop that drives the model."""
