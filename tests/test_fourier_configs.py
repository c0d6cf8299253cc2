"""The paper-000 recipes: every method/depth validates and picks the right model pieces."""

import pytest

from vit_spectral.configs import cifar100_vit_ti_fourier, imagenet_deit_s_fourier
from vit_spectral.training.config_checks import validate_config
from vit_spectral.models import model_kwargs


@pytest.mark.parametrize("module,arg,depth,drop_path", [
    (imagenet_deit_s_fourier, "depth=12", 12, 0.1),
    (imagenet_deit_s_fourier, "depth=24", 24, 0.2),
    (cifar100_vit_ti_fourier, "", 12, 0.1),
])
@pytest.mark.parametrize("method", ["baseline", "attn_scale", "feat_scale"])
def test_recipes_validate_and_select_the_method(module, arg, depth, drop_path, method):
  config = module.get_config(",".join(filter(None, [arg, f"method={method}"])))
  validate_config(config)
  fields = model_kwargs(config.model)
  assert fields["depth"] == depth and fields["drop_path_rate"] == drop_path
  assert fields["attention"] == ("attn_scale" if method == "attn_scale" else "dot_product")
  assert fields.get("block_options", {}).get("feat_scale", False) == (method == "feat_scale")
  assert config.optim.weight_decay == 0.05 and config.label_smoothing == 0.1


def test_unknown_method_or_depth_is_rejected():
  with pytest.raises(ValueError, match="method='featscale'"):
    imagenet_deit_s_fourier.get_config("method=featscale")
  with pytest.raises(ValueError, match="depth=16"):
    imagenet_deit_s_fourier.get_config("depth=16")
