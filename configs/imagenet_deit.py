r"""DeiT-S/16 on ImageNet-1k (Touvron et al., 2021), the recipe of paper 000 (§5).

Launch on a TPU VM pod slice (every worker; data prepared with
`tfds build imagenet2012 --data_dir=gs://BUCKET/tfds`, manual tars in
<data_dir>/downloads/manual):

  python train.py --distributed --config=configs/imagenet_deit.py \
      --config.input.data_dir=gs://BUCKET/tfds --workdir=gs://BUCKET/deit_s

Arguments: variant (S/16), batch (1024), epochs (300), attention.

Meant to reach: 79.8% top-1 (DeiT-S, Touvron et al. 2021; paper 000 Table 1 uses
it as the 12-layer baseline).
"""

from configs import common

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMAGENET_TRAIN = 1_281_167


def get_config(arg=None):
  args = common.parse_arg(arg, variant="S/16", batch=1024, epochs=300,
                          attention="dot_product")
  config = common.base_config()
  steps_per_epoch = IMAGENET_TRAIN // args.batch
  config.num_epochs = args.epochs
  config.log_every = 100
  config.eval_every = 5 * steps_per_epoch
  config.checkpoint_every = 1000
  config.input = common.input_config(
      "imagenet2012", image_size=224, batch_size=args.batch, eval_batch_size=1000,
      eval_split="validation", train_augment="random_resized_crop", flip=True,
      eval_resize="resize_center_crop", crop_fraction=0.875,
      mean=IMAGENET_MEAN, std=IMAGENET_STD, shuffle_buffer=50_000)
  config.model = common.model_config(args.variant, drop_path_rate=0.1,
                                     attention=dict(name=args.attention))
  # DeiT: lr 5e-4 × batch / 512, weight decay 0.05, 5 warmup epochs, cosine to 1e-5.
  config.optim = common.optim_config(
      "adamw", learning_rate=5e-4 * args.batch / 512, warmup_steps=5 * steps_per_epoch,
      end_learning_rate=1e-5, weight_decay=0.05)
  config.label_smoothing = 0.1
  return config
