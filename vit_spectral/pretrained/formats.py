"""The formats pretrained weights are read in (`config.init_from.format`,
`loading.load_into`), and the file suffixes of each."""

# timm files, big_vision .npz files and trainer workdirs.
FORMATS = ("timm", "big_vision", "vit_spectral")
# The file suffixes each file format is read from (`weight_files`).
SUFFIXES = {"timm": (".safetensors", ".pth", ".pt", ".bin"), "big_vision": (".npz",)}
