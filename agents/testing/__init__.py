"""Test helpers for frontdesk and for plugin authors: a scripted LLM, and (voice) fake
speech-to-text, VAD and TTS with timed speech. See docs/plugins.md, "Testing"."""

from frontdesk.agents.testing.llm import Reply, ScriptedLLM, reply_chunk

__all__ = ["Reply", "ScriptedLLM", "reply_chunk"]
