"""DLC_STOP_AT_STEP, which an experiment with algorithm pbt gives each trial."""

import pytest

from opendlc.environment import Env


def test_stop_at_step_is_read():
    assert Env.from_environ({"DLC_STOP_AT_STEP": "15"}).stop_at_step == 15


def test_stop_at_step_is_none_outside_pbt():
    assert Env.from_environ({}).stop_at_step is None


def test_malformed_stop_at_step_is_named():
    with pytest.raises(ValueError, match="DLC_STOP_AT_STEP"):
        Env.from_environ({"DLC_STOP_AT_STEP": "ten"})
