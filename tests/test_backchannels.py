"""Backchannels: the words a caller says to mean "go on" (issue 19); the matcher, and where the
list comes from (the setting beats the profile, which beats the built-in list)."""

from __future__ import annotations

import pytest

from frontdesk.agents.backchannels import DEFAULT, Backchannels, configured
from frontdesk.core.errors import ConfigError
from frontdesk.core.profile import Profile, Voice, load_profile
from frontdesk.core.settings import Settings


@pytest.mark.parametrize(
    ("text", "only", "words"),
    [
        ("mm-hm", True, 0),
        ("Mm-hmm.", True, 0),
        ("Uh-huh.", True, 0),
        ("uh huh", True, 0),
        ("OK.", True, 0),
        ("yeah, sure", True, 0),
        ("okay okay", True, 0),
        ("Right!", True, 0),
        ("okay stop", False, 1),
        ("wait no I meant neon", False, 5),
        ("huh", False, 1),  # "uh-huh" is listed, "huh" alone asks a question
        ("", False, 0),
        ("...", False, 0),
    ],
)
def test_a_transcript_is_a_backchannel_only_when_every_word_belongs_to_one(text, only, words):
    chans = Backchannels(DEFAULT)
    assert chans.only(text) is only
    assert chans.words(text) == words


def test_the_setting_beats_the_profile_which_beats_the_built_in_list():
    profile = Profile(voice=Voice(backchannels=["genau", "ja"]))
    assert configured(Settings(), Profile()).phrases == DEFAULT
    from_profile = configured(Settings(), profile)
    assert from_profile.only("Genau.") and not from_profile.only("mm-hm")
    from_env = configured(Settings(backchannels="jawohl, na klar"), profile)
    assert from_env.only("na klar") and not from_env.only("genau")
    assert not configured(Settings(backchannels=""), profile).only("mm-hm")  # none at all


def test_the_setting_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("FRONTDESK_BACKCHANNELS", "oui, d'accord")
    assert configured(Settings(), Profile()).only("D'accord.")


def test_a_misspelt_voice_key_is_one_line_naming_the_file_and_key(tmp_path):
    path = tmp_path / "frontdesk.toml"
    path.write_text('[voice]\nbackchannel = ["ja"]\n')
    with pytest.raises(ConfigError, match=r"frontdesk.toml: voice.backchannel: unknown key"):
        load_profile(path)
    path.write_text('[voice]\nbackchannels = "ja"\n')
    with pytest.raises(ConfigError, match=r"voice.backchannels"):
        load_profile(path)
    path.write_text('[voice]\nbackchannels = ["ja", "genau"]\n')
    assert load_profile(path).voice.backchannels == ["ja", "genau"]
