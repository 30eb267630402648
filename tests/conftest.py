import numpy as np
import pytest

import bayeskern

bayeskern.enable_x64()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
