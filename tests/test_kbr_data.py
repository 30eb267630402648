"""Generated KBR data: the image stand-ins and the circular dynamics."""

import jax
import numpy as np

from bayeskern import kbr
from bayeskern.kbr.data import _heart_image, _panorama_view, panorama_scene


def test_sprite_renders_a_quantised_heart_of_the_right_area():
    image = np.asarray(_heart_image(np.array([0.0, 0.0]), 64))
    # area of (a^2 + b^2 - 1)^3 <= a^2 b^3 on a fine grid, in pixels (1 unit = 4 px)
    a, b = np.meshgrid(np.linspace(-1.5, 1.5, 1501), np.linspace(-1.5, 1.5, 1501))
    area = np.mean((a**2 + b**2 - 1) ** 3 - a**2 * b**3 <= 0) * 9 * 16
    assert abs(image.sum() - area) < 0.02 * area
    assert 0 <= image.min() and image.max() == 1.0
    # positions within one of the 32 quantisation cells draw the same image; the next cell moves it
    base = np.asarray(_heart_image(np.array([0.05, 0.05]), 64))  # level round(31 * 1.55 / 3) = 16
    np.testing.assert_array_equal(base, _heart_image(np.array([0.08, 0.08]), 64))  # level 16 too
    moved = np.asarray(_heart_image(np.array([0.12, 0.05]), 64))  # level 17 in x: 43 / 31 px to the right
    assert not np.array_equal(moved, base) and abs(moved.sum() - base.sum()) < 0.02 * base.sum()
    cols = np.nonzero(image.sum(0))[0]
    assert 26 <= cols.mean() <= 38  # centred near column 10 + 16 * 43 / 31 = 32.2
    assert _heart_image(np.array([0.0, 0.0]), 32).shape == (32, 32)


def test_image_sequences_are_seeded_and_shaped():
    sprite = kbr.data.sprite_sequence(30, jax.random.key(0), T_test=5)
    assert sprite.X.shape == (30, 4096) and sprite.Z.shape == (30, 2) and sprite.X_test.shape == (5, 4096)
    again = kbr.data.sprite_sequence(30, jax.random.key(0), T_test=5)
    np.testing.assert_array_equal(sprite.X, again.X)
    pano = kbr.data.panorama_sequence(30, jax.random.key(1), T_test=5)
    assert pano.X.shape == (30, 5184) and np.allclose(np.linalg.norm(pano.Z, axis=1), 1.0)
    view = np.asarray(_panorama_view(1.0, panorama_scene(jax.random.key(0))))
    assert view.shape == (36, 48, 3) and view.min() >= 0 and view.max() <= 1
    # the view is periodic in the heading
    np.testing.assert_allclose(_panorama_view(1.0 + 2 * np.pi, panorama_scene(jax.random.key(0))), view, atol=1e-9)


def test_circle_dynamics_follow_the_transition():
    seq = kbr.data.circle_dynamics(50, jax.random.key(3), T_test=10, sigma_z=1e-9, sigma_x=1e-9,
                                   setting="oscillatory")
    f, _ = kbr.data.circle_transition("oscillatory")
    Z = np.asarray(seq.Z)
    np.testing.assert_allclose(np.asarray(jax.vmap(f)(Z[:-1])), Z[1:], atol=1e-7)
    np.testing.assert_allclose(Z[0], np.asarray(f(np.array([1.0, 0.0]))), atol=1e-7)
