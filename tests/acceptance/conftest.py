"""Shared acceptance steps. Step modules live beside this file as `steps_<area>.py` and are
star-imported here, never from one test module into another (pytest-bdd #542, #630)."""

from tests.acceptance.steps_agents import *  # noqa: F403
from tests.acceptance.steps_common import *  # noqa: F403
from tests.acceptance.steps_enrich import *  # noqa: F403
from tests.acceptance.steps_finality import *  # noqa: F403
from tests.acceptance.steps_first_hour import *  # noqa: F403
from tests.acceptance.steps_pool import *  # noqa: F403
from tests.acceptance.steps_rules import *  # noqa: F403
from tests.acceptance.steps_treedx import *  # noqa: F403
