# The perfweave Spack package repository (docs/install.md): spack repo add this directory.
