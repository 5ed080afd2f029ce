"""A toolkit-style PyTorch training loop whose only change is the data loader.

A tiny pair-potential MLIP (element embeddings, a radial MLP over the
neighbor list, per-atom energies summed per graph, forces by autograd) is
trained on a store for a few steps. ``--loader toolkit`` runs the same loop on
nvalchemi-toolkit's ``DataLoader`` (when it is installed); the model code
reads the batch by the same names either way (``batch.positions``,
``batch.neighbor_list``, ``batch.batch_idx``, ...).

    python python/examples/train_torch.py                      # a generated store, 20 steps
    python python/examples/train_torch.py --store train.zarr --steps 200 --cutoff 5.0
"""

import argparse
import tempfile
import time

import numpy as np
import torch

import atomzarr
from atomzarr.torch import to_torch


def make_store(path: str, n: int = 256, seed: int = 0) -> None:
    """Random clusters of H, C, O labelled by a Morse-like pair energy, with
    neighbor lists at 3 Å (so the example needs no download)."""
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(n):
        atoms = int(rng.integers(4, 16))
        pos = rng.uniform(0, 4.0, size=(atoms, 3))
        z = rng.choice([1, 6, 8], size=atoms)
        d = pos[:, None, :] - pos[None, :, :]
        r = np.linalg.norm(d, axis=-1)
        i, j = np.nonzero((r < 3.0) & (r > 0))
        e_pair = np.exp(-2 * (r - 1.2)) - 2 * np.exp(-(r - 1.2))
        f_pair = (2 * np.exp(-2 * (r - 1.2)) - 2 * np.exp(-(r - 1.2))) / np.where(r > 0, r, 1)
        mask = (r < 3.0) & (r > 0)
        energy = 0.5 * float(np.sum(np.where(mask, e_pair, 0)))
        forces = np.sum(np.where(mask[..., None], f_pair[..., None] * d, 0), axis=1)
        samples.append(
            {
                "atomic_numbers": z,
                "positions": pos,
                "forces": forces,
                "energy": energy,
                "cell": np.zeros((3, 3)),
                "pbc": [False, False, False],
                "neighbor_list": np.stack([i, j], axis=1),
                "shifts": np.zeros((len(i), 3)),
            }
        )
    with atomzarr.Writer(path) as w:
        w.write(samples)


class PairMLIP(torch.nn.Module):
    """E = sum over edges of phi(Z_i, Z_j, |r_ij|) / 2, per graph."""

    def __init__(self, hidden: int = 32, cutoff: float = 3.0):
        super().__init__()
        self.cutoff = cutoff
        self.embed = torch.nn.Embedding(100, 8)
        self.radial = torch.nn.Sequential(
            torch.nn.Linear(16 + 8, hidden), torch.nn.SiLU(), torch.nn.Linear(hidden, hidden), torch.nn.SiLU(), torch.nn.Linear(hidden, 1)
        )
        self.register_buffer("centers", torch.linspace(0.5, cutoff, 8))

    def forward(self, batch) -> torch.Tensor:
        pos = batch.positions
        src, dst = batch.neighbor_list[:, 0].long(), batch.neighbor_list[:, 1].long()
        vec = pos[dst] - pos[src] + batch.shifts
        r = vec.norm(dim=-1, keepdim=True)
        rbf = torch.exp(-4.0 * (r - self.centers) ** 2)
        envelope = 0.5 * (torch.cos(torch.pi * r / self.cutoff) + 1) * (r < self.cutoff)
        z = self.embed(batch.atomic_numbers.long())
        e_edge = self.radial(torch.cat([z[src], z[dst], rbf], dim=-1)) * envelope
        e_atom = torch.zeros(pos.shape[0], 1, dtype=pos.dtype).index_add_(0, src, 0.5 * e_edge)
        return torch.zeros(int(batch.num_graphs), 1, dtype=pos.dtype).index_add_(0, batch.batch_idx.long(), e_atom)


def atomzarr_loader(store: str, batch_size: int, prefetch: int, cutoff, seed: int):
    reader = atomzarr.open(store)
    loader = atomzarr.DataLoader(reader, batch_size=batch_size, shuffle=True, seed=seed, prefetch_factor=prefetch, cutoff=cutoff)
    return loader, lambda b: to_torch(b, "cpu")


def toolkit_loader(store: str, batch_size: int, prefetch: int, cutoff, seed: int):
    from nvalchemi.data.datapipes import AtomicDataZarrReader, DataLoader, Dataset

    if cutoff is not None:
        raise SystemExit("--cutoff needs the atomzarr loader")
    torch.manual_seed(seed)
    loader = DataLoader(Dataset(AtomicDataZarrReader(store), device="cpu"), batch_size=batch_size, shuffle=True, prefetch_factor=prefetch)
    return loader, lambda b: b


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", help="a store (default: generate 256 clusters in a temporary folder)")
    p.add_argument("--loader", choices=["atomzarr", "toolkit"], default="atomzarr")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--cutoff", type=float, help="build neighbor lists at this cutoff while loading (atomzarr)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    tmp = None
    store = args.store
    if store is None:
        tmp = tempfile.TemporaryDirectory()
        store = f"{tmp.name}/clusters.zarr"
        make_store(store)
    torch.manual_seed(args.seed)
    model = PairMLIP(cutoff=args.cutoff or 3.0)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    make = atomzarr_loader if args.loader == "atomzarr" else toolkit_loader
    # ---- the only change between the toolkit and atomzarr: the loader ----
    loader, as_batch = make(store, args.batch_size, args.prefetch, args.cutoff, args.seed)
    # ------------------------------------------------------------------------
    step, epoch, first, last = 0, 0, None, None
    start = time.perf_counter()
    while step < args.steps:
        for raw in loader:
            batch = as_batch(raw)
            batch.positions.requires_grad_(True)
            energy = model(batch)
            forces = -torch.autograd.grad(energy.sum(), batch.positions, create_graph=True)[0]
            loss = torch.nn.functional.mse_loss(energy, batch.energy.reshape(-1, 1)) + torch.nn.functional.mse_loss(forces, batch.forces)
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = float(loss.detach())
            if not np.isfinite(value):
                raise SystemExit(f"step {step}: loss is {value}")
            first = value if first is None else first
            last = value
            step += 1
            if step % 10 == 0 or step == args.steps:
                print(f"epoch {epoch} step {step}: loss {value:.5f}")
            if step == args.steps:
                break
        epoch += 1
    took = time.perf_counter() - start
    print(f"{args.loader}: {step} steps in {took:.2f}s, loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
