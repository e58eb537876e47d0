"""The LiveKit call side: department agents, triage, handoff, the call runtime, the patterns as
function tools, follow-up delivery, acks, progress and RPC; the programs in ``programs/``."""
