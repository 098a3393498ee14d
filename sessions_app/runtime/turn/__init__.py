"""The agent turn: the loop that calls the model and runs the tools (turns), the agents and their
prompts, approvals, the queue and steer, the turn lease, titles, timings, usage and cost, the
memory put in the prompt, and fitting the history into the window (context_fit)."""
