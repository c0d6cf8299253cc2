r"""Skip-free (attention-only) ViT-T of depth 1-12 (paper 004 §5.3, Table 7).

Every block is attention only: no MLP and no residual around attention
(`model.block = dict(attention_residual="none", use_mlp=False)`); with
attention=hopfield the only skip left is MHA's own α·LN(x) inside the module.
Drop path is off (no residual branch to drop). The rest is the ViT-T recipe of paper 004 App. G Table 10
(`configs/cifar_recipes.table10`, as `configs/hopfield_vit.py` uses it).

Launch the sweep (one run per depth and attention):

  for d in 1 2 4 8 12; do for a in dot_product hopfield; do
    python train.py --config=configs/hopfield_attention_only.py:depth=$d,attention=$a,dataset=cifar10 \
        --workdir=workdir/attn_only_${a}_d$d --config.input.data_dir=/data/tfds
  done; done

Expected (paper Table 7, CIFAR-10 / CIFAR-100 test accuracy):
  depth  self-attention   MHA (α = α' = 0.5)
  1      55.1 / 30.9      65.4 / 40.1
  2      63.7 / 40.1      79.8 / 56.9
  4      57.4 / 32.3      85.7 / 64.4
  8      48.6 / 17.2      80.3 / 49.9
  12     10.0 /  1.0      10.0 /  1.0

Arguments: depth, attention (hopfield, dot_product), dataset (cifar10,
cifar100), alpha, alpha_hidden (negative = alpha), epochs, dtype (bfloat16 =
mixed precision, the default; float32), lr_scaling (none | linear | sqrt, as
`configs/hopfield_vit.py`; ViT-T's batch 256 gives 6.25e-5 with each).
"""

from vit_spectral.configs import common
from vit_spectral.configs.cifar_recipes import TABLE10_LR_SCALING
from vit_spectral.configs.hopfield_vit import table_10_config


def get_config(arg=None):
  args = common.parse_arg(arg, depth=4, dataset="cifar10", attention="hopfield",
                          alpha=0.5, alpha_hidden=-1.0, epochs=300, size="Ti",
                          dtype=common.ACCELERATOR_DTYPE, lr_scaling=TABLE10_LR_SCALING)
  if args.size != "Ti":
    raise ValueError(f"config argument size={args.size!r}; Table 7 uses 'Ti' only")
  # Drop path acts on residual branches; these blocks have none.
  config = table_10_config(args, drop_path_rate=0.0,
                           block=dict(attention_residual="none", use_mlp=False))
  config.model.depth = args.depth
  return config
