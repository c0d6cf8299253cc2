r"""LipsFormer-CSwin-T/S/B on ImageNet-1k, trained without learning-rate warmup (paper 001).

Launch on a Cloud TPU VM pod slice (see docs/running.md;
ImageNet prepared once with `tfds build imagenet2012`):

  launch/tpu_pod.sh --tpu=NAME --zone=ZONE -- \
      --config=configs/lipsformer_cswin_imagenet.py:size=T \
      --config.input.data_dir=gs://BUCKET/tfds --workdir=gs://BUCKET/lipsformer_cswin_t

Meant to reach (paper 001, Table 2, 224², 300 epochs, no warmup;
`eval_accuracy`, `eval_ema_accuracy` the EMA): LipsFormer-CSwin-T 83.5%,
LipsFormer-CSwin-S 83.8%, LipsFormer-CSwin-B 84.6% (CSwin-T/S/B with
warmup: 82.7 / 83.6 / 84.2%, `imagenet_cswin.py`).

Model: the registered "LipsFormer-CSwin-T/S/B" (`models.cswin`: CenterNorm,
scaled cosine attention τ = 12 with LePE, spectral init, α = 0.2 (the
authors' code; Table 3's best), the dw+pw and second dw convolution branches,
LipsFormer block order, non-overlapping embedding and merging, DropPath
without rescaling in training, × (1 − p) at evaluation).

Recipe (§5.1 and App. C, Table 6): AdamW (0.9, 0.999), eps 1e-8, no
gradient clipping, batch 2048, lr 2e-3 (T, S) / 1e-3 (B, Table 6) at that
batch (scaled linearly with `batch`), cosine decay with NO warmup over 300
epochs, weight decay 0.05 / 0.05 / 0.1, max DropPath 0.2 / 0.4 / 0.5, EMA
0.99984 / 0.99984 / 0.99992, label smoothing 0.1, RandAugment (9, 0.5),
Mixup 0.8, CutMix 1.0. "A similar training strategy as in CSwin" (§5.1)
fills in the rest from `imagenet_cswin.py`: random erasing 0.25, the
RandAugment ops, the evaluation crop (bicubic, 0.9) and the floor of the
cosine (1e-5, no cooldown epochs: the paper trains 300).

Arguments (`lipsformer_cswin_imagenet.py:size=S,...`): size (T | S | B),
batch, epochs, dtype (bfloat16 = mixed precision, the default; float32).
"""

from vit_spectral.configs import common
from vit_spectral.configs.imagenet_cswin import check_size, cswin_input
from vit_spectral.configs.lipsformer_parts import lipsformer_optim

BATCH = 2048
# size -> (lr at batch 2048, weight decay, DropPath, EMA)   (§5.1, Table 6)
LIPSFORMER_CSWIN_SIZES = {"T": (2e-3, 0.05, 0.2, 0.99984),
                          "S": (2e-3, 0.05, 0.4, 0.99984),
                          "B": (1e-3, 0.1, 0.5, 0.99992)}


def get_config(arg=None):
  args = common.parse_arg(arg, size="T", batch=BATCH, epochs=300.0,
                          dtype=common.ACCELERATOR_DTYPE)
  check_size(args.size, LIPSFORMER_CSWIN_SIZES)
  lr, weight_decay, drop_path, ema = LIPSFORMER_CSWIN_SIZES[args.size]
  config = common.base_config()
  common.epoch_cadences(config, args.epochs, eval_every_epochs=1)
  cswin_input(config, args.batch)
  config.ema_decay = ema
  config.model = common.model_config(f"LipsFormer-CSwin-{args.size}",
                                     drop_path_rate=drop_path, dtype=args.dtype)
  config.optim = lipsformer_optim(lr, weight_decay=weight_decay)
  config.optim.base_batch_size = BATCH
  config.optim.end_learning_rate = 1e-5
  return config
