r"""Trains a vit_spectral config: `python train.py --config=configs/x.py --workdir=DIR`.

The command line is `vit_spectral.main` (installed as `vit-spectral-train`);
`python train.py --helpfull` lists every flag.
"""

from vit_spectral import main

if __name__ == "__main__":
  main.run()
