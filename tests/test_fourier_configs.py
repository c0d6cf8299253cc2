"""The paper-000 recipes: every method/depth validates and picks the right model pieces."""

import pytest

from vit_spectral.configs import cifar100_vit_ti_fourier, imagenet_deit_s_fourier
from vit_spectral.training.config_checks import validate_config
from vit_spectral.models import build_model, model_kwargs


@pytest.mark.parametrize("module,arg,depth,drop_path,dropout", [
    (imagenet_deit_s_fourier, "depth=12", 12, 0.1, 0.0),
    (imagenet_deit_s_fourier, "depth=24", 24, 0.1, 0.2),
    (cifar100_vit_ti_fourier, "", 12, 0.1, 0.0),
])
@pytest.mark.parametrize("method", ["baseline", "attn_scale", "feat_scale"])
def test_recipes_validate_and_select_the_method(module, arg, depth, drop_path, dropout, method):
  config = module.get_config(",".join(filter(None, [arg, f"method={method}"])))
  validate_config(config)
  fields = model_kwargs(config.model)
  block = fields["block"]
  assert fields["depth"] == depth and fields["encoder"].drop_path_rate == drop_path
  assert block.dropout_rate == dropout
  assert block.attention == ("attn_scale" if method == "attn_scale" else "dot_product")
  assert block.feat_scale == (method == "feat_scale")
  assert config.optim.weight_decay == 0.05 and config.label_smoothing == 0.1


def test_unknown_method_or_depth_is_rejected():
  with pytest.raises(ValueError, match="method='featscale'"):
    imagenet_deit_s_fourier.get_config("method=featscale")
  with pytest.raises(ValueError, match="depth=16"):
    imagenet_deit_s_fourier.get_config("depth=16")


@pytest.mark.parametrize("method", ["baseline", "attn_scale", "feat_scale"])
def test_depth_24_reads_the_authors_drop_as_dropout_with_deits_drop_path(method):
  """§5.1's "dropout rate to 0.2" for 24 layers is the authors' `--drop 0.2`
  (DeiT's dropout, the model's dropout_rate), with `--drop-path` left at DeiT's
  0.1; the 12-layer commands pass neither. Explicit arguments still win."""
  model = build_model(imagenet_deit_s_fourier.get_config(f"depth=24,method={method}").model,
                      1000)
  assert (model.depth, model.block.dropout_rate, model.encoder.drop_path_rate) == (24, 0.2, 0.1)
  model = build_model(imagenet_deit_s_fourier.get_config(f"depth=12,method={method}").model,
                      1000)
  assert (model.depth, model.block.dropout_rate, model.encoder.drop_path_rate) == (12, 0.0, 0.1)
  config = imagenet_deit_s_fourier.get_config(f"depth=24,method={method},dropout=0,"
                                              "drop_path=0.2")
  assert (config.model.dropout_rate, config.model.drop_path_rate) == (0.0, 0.2)


def test_the_authors_deit_feat_scale_form_is_one_field_away():
  config = imagenet_deit_s_fourier.get_config("depth=24,method=feat_scale")
  assert config.model.block.feat_scale_form == "equations"     # eqs. 10-12 by default
  config.model.block.feat_scale_form = "authors_deit"
  validate_config(config)
  assert model_kwargs(config.model)["block"].feat_scale_form == "authors_deit"


@pytest.mark.parametrize("variant,drop_path", [("CaiT-XXS24", 0.05), ("CaiT-S24", 0.1)])
@pytest.mark.parametrize("method", ["none", "attn_scale", "feat_scale"])
def test_cait_finetune_recipe_is_app_g1s(variant, drop_path, method):
  """App. G.1 / Table 3: CaiT-XXS24 and CaiT-S24 fine-tuned 60 epochs at lr 5e-5
  and weight decay 5e-4 from timm's CaiT weights. 5e-5 is the authors' `--lr`,
  which their DeiT main.py scales by the total batch / 512; their command runs
  2 GPUs x 128 with 1 warmup epoch and --min-lr 1e-6."""
  from vit_spectral.configs import cait_finetune_fourier  # noqa: PLC0415
  from vit_spectral.models.cait import CaiT, VARIANTS  # noqa: PLC0415
  from vit_spectral.pretrained.cait_timm import TIMM_NAMES  # noqa: PLC0415
  from vit_spectral.training.optim import peak_learning_rate  # noqa: PLC0415
  config = cait_finetune_fourier.get_config(f"variant={variant},method={method}")
  validate_config(config)
  model = build_model(config.model, 1000)
  assert isinstance(model, CaiT)
  shape = dict(patch_size=model.patch_size, hidden_size=model.hidden_size, depth=model.depth,
               num_heads=model.block.num_heads, mlp_dim=model.block.mlp_dim)
  assert shape == VARIANTS[variant]
  assert model.block.attention == ("attn_scale" if method == "attn_scale" else "dot_product")
  assert model.block.feat_scale == (method == "feat_scale")
  assert model.encoder.drop_path_rate == drop_path
  assert config.num_epochs == 60 and config.optim.weight_decay == 5e-4
  assert config.optim.learning_rate == 5e-5
  batch = 2 * 128
  assert config.input.batch_size == batch
  assert peak_learning_rate(config.optim, batch) == pytest.approx(5e-5 * batch / 512)
  assert config.optim.warmup_epochs == 1 and config.optim.end_learning_rate == 1e-6
  init = config.init_from
  assert (init.format, init.reinit_head) == ("timm", False)
  assert TIMM_NAMES[init.path.removesuffix(".safetensors")] == variant
  with pytest.raises(ValueError, match=r"variant='CaiT-M36'; choose one of"):
    cait_finetune_fourier.get_config("variant=CaiT-M36")


def test_deit_s_finetune_recipe_is_the_same_recipe_on_deit_s():
  from vit_spectral.configs import cait_finetune_fourier, deit_s_finetune_fourier  # noqa: PLC0415
  deit = deit_s_finetune_fourier.get_config("method=feat_scale")
  cait = cait_finetune_fourier.get_config("method=feat_scale")
  validate_config(deit)
  assert model_kwargs(deit.model)["hidden_size"] == 384 and deit.model.variant is None
  for field in ("learning_rate", "base_batch_size", "weight_decay", "warmup_epochs",
                "end_learning_rate"):
    assert deit.optim[field] == cait.optim[field], field
  assert deit.num_epochs == cait.num_epochs and deit.input.batch_size == cait.input.batch_size
