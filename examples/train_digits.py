"""Train an MLP on scikit-learn's bundled digits (8x8 images, 10 classes; no download) with
hologram_torch modules and autograd, next to the same MLP in pure PyTorch with the same seed.

Run: python examples/train_digits.py
"""

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import hologram_torch as hgt


def data(seed):
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    mean, std = xtr.mean(0), xtr.std(0) + 1e-6
    prep = lambda a: torch.from_numpy((a - mean) / std)  # noqa: E731
    return prep(xtr), torch.from_numpy(ytr), prep(xte), torch.from_numpy(yte)


def mlp(nn, hidden):
    return torch.nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def train(model, loss_fn, xtr, ytr, epochs, seed):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(xtr), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
    return model


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item() * 100


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    xtr, ytr, xte, yte = data(a.seed)

    torch.manual_seed(a.seed)
    hg_model = mlp(hgt.nn, a.hidden)
    t0 = time.perf_counter()
    train(hg_model, hgt.nn.CrossEntropyLoss(), xtr, ytr, a.epochs, a.seed)
    hg_time = time.perf_counter() - t0
    hg_acc = accuracy(hg_model, xte, yte)

    torch.manual_seed(a.seed)
    ref = mlp(torch.nn, a.hidden)
    t0 = time.perf_counter()
    train(ref, torch.nn.CrossEntropyLoss(), xtr, ytr, a.epochs, a.seed)
    torch_time = time.perf_counter() - t0
    torch_acc = accuracy(ref, xte, yte)

    print(f"hologram_torch test accuracy: {hg_acc:.2f}%  ({hg_time:.1f} s)")
    print(f"pure torch     test accuracy: {torch_acc:.2f}%  ({torch_time:.1f} s)")
    return hg_acc, torch_acc


if __name__ == "__main__":
    main()
