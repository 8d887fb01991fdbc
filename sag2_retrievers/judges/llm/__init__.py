"""The LLM judges, over HTTP: hosted JEV (`jev`), any OpenAI-compatible server
(`openai_compat`), a framework's chat model (`chat`), with their prompts, reply grading,
transports, HTTP plumbing and key handling."""
