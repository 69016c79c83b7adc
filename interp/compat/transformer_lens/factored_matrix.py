"""FactoredMatrix: a low-rank product ``A @ B`` kept as its two factors.

``W_Q @ W_K.T`` of a head is ``d_model x d_model`` but has rank ``d_head``; holding the factors makes products,
norms, singular values and eigenvalues cost ``d_head``-sized work. The singular value decomposition goes
through QR factorisations of both factors (``A = Qa Ra``, ``B.T = Qb Rb``), so only the ``mdim x mdim`` core
``Ra @ Rb.T`` is decomposed. Eigenvalues are those of ``B @ A``, which are the non-zero eigenvalues of ``A @ B``.
Leading axes broadcast (``model.OV`` is ``[layer, head, d_model, d_model]``).
"""

from __future__ import annotations

import functools

import torch


class FactoredMatrix:
    """The matrix ``A @ B`` with ``A [..., ldim, mdim]`` and ``B [..., mdim, rdim]``.

    >>> m = FactoredMatrix(torch.ones(3, 1), torch.ones(1, 3))
    >>> m.shape, m.norm().item()
    (torch.Size([3, 3]), 3.0)
    """

    def __init__(self, A: torch.Tensor, B: torch.Tensor) -> None:
        if A.ndim < 2 or B.ndim < 2 or A.shape[-1] != B.shape[-2]:
            raise ValueError(
                f"FactoredMatrix needs A [..., ldim, mdim] and B [..., mdim, rdim] with matching mdim; got A "
                f"{tuple(A.shape)} and B {tuple(B.shape)}"
            )
        lead = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        self.ldim, self.mdim, self.rdim = A.shape[-2], A.shape[-1], B.shape[-1]
        self.A = A.broadcast_to(*lead, self.ldim, self.mdim)
        self.B = B.broadcast_to(*lead, self.mdim, self.rdim)
        self.shape = torch.Size((*lead, self.ldim, self.rdim))
        self.has_leading_dims = bool(lead)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def AB(self) -> torch.Tensor:
        """The full product ``[..., ldim, rdim]``."""
        return self.A @ self.B

    @property
    def BA(self) -> torch.Tensor:
        """``B @ A`` ``[..., mdim, mdim]``; needs a square matrix (``ldim == rdim``)."""
        if self.ldim != self.rdim:
            raise ValueError(f"BA needs a square matrix; this one is {self.ldim} x {self.rdim}")
        return self.B @ self.A

    @property
    def T(self) -> FactoredMatrix:
        return FactoredMatrix(self.B.transpose(-2, -1), self.A.transpose(-2, -1))

    @property
    def pair(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.A, self.B

    def __matmul__(self, other: torch.Tensor | FactoredMatrix) -> torch.Tensor | FactoredMatrix:
        if isinstance(other, FactoredMatrix):
            return (self @ other.A) @ other.B
        if other.ndim < 2:  # a vector: the result is a vector
            return (self.A @ (self.B @ other[..., None]))[..., 0]
        if self.rdim > self.mdim:  # keep the narrower inner dimension
            return FactoredMatrix(self.A, self.B @ other)
        return FactoredMatrix(self.AB, other)

    def __rmatmul__(self, other: torch.Tensor) -> torch.Tensor | FactoredMatrix:
        if other.ndim < 2:
            return ((other[..., None, :] @ self.A) @ self.B)[..., 0, :]
        if self.ldim > self.mdim:
            return FactoredMatrix(other @ self.A, self.B)
        return FactoredMatrix(other, self.AB)

    def __mul__(self, scalar: float | torch.Tensor) -> FactoredMatrix:
        if isinstance(scalar, torch.Tensor) and scalar.numel() != 1:
            scalar = scalar[..., None, None]  # one scalar per leading index
        return FactoredMatrix(self.A * scalar, self.B)

    __rmul__ = __mul__

    @functools.cached_property
    def _svd(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        qa, ra = torch.linalg.qr(self.A)  # [..., ldim, k], [..., k, mdim]
        qb, rb = torch.linalg.qr(self.B.transpose(-2, -1))  # [..., rdim, k'], [..., k', mdim]
        um, s, vhm = torch.linalg.svd(ra @ rb.transpose(-2, -1), full_matrices=False)  # core [..., k, k']
        return qa @ um, s, qb @ vhm.transpose(-2, -1)

    def svd(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(U, S, V)`` with ``U @ S.diag_embed() @ V.transpose(-2, -1)`` equal to the matrix."""
        return self._svd

    @property
    def U(self) -> torch.Tensor:
        return self._svd[0]

    @property
    def S(self) -> torch.Tensor:
        return self._svd[1]

    @property
    def V(self) -> torch.Tensor:
        return self._svd[2]

    @property
    def Vh(self) -> torch.Tensor:
        """The right singular vectors as columns, the same as :attr:`V` (TransformerLens's historical name)."""
        return self._svd[2]

    @property
    def eigenvalues(self) -> torch.Tensor:
        """Complex eigenvalues ``[..., mdim]`` (those of ``B @ A``, the non-zero ones of ``A @ B``)."""
        ba = self.BA
        return torch.linalg.eig(ba.float() if ba.dtype in (torch.float16, torch.bfloat16) else ba).eigenvalues

    def norm(self) -> torch.Tensor:
        """The Frobenius norm, ``[...]``."""
        return self.S.pow(2).sum(-1).sqrt()

    def make_even(self) -> FactoredMatrix:
        """The same matrix as ``(U sqrt(S), sqrt(S) V.T)``: both factors carry half of each singular value."""
        root = self.S.sqrt()
        return FactoredMatrix(self.U * root[..., None, :], root[..., :, None] * self.V.transpose(-2, -1))

    def collapse_l(self) -> torch.Tensor:
        """``S V.T`` ``[..., mdim, rdim]``: the matrix with its left orthogonal factor removed."""
        return self.S[..., :, None] * self.V.transpose(-2, -1)

    def collapse_r(self) -> torch.Tensor:
        """``U S`` ``[..., ldim, mdim]``."""
        return self.U * self.S[..., None, :]

    def get_corner(self, k: int = 3) -> torch.Tensor:
        """The top-left ``k x k`` corner of the product (and the first ``k`` of each leading axis)."""
        corner = self.A[..., :k, :] @ self.B[..., :, :k]
        return corner[tuple(slice(k) for _ in range(corner.ndim))]

    def unsqueeze(self, dim: int) -> FactoredMatrix:
        return FactoredMatrix(self.A.unsqueeze(dim), self.B.unsqueeze(dim))

    def __getitem__(self, index) -> FactoredMatrix:
        """Index the leading axes (``model.OV[layer, head]``); the matrix axes are not indexed here."""
        index = index if isinstance(index, tuple) else (index,)
        if len([i for i in index if i is not None and i is not Ellipsis]) > len(self.shape) - 2:
            raise IndexError(
                f"index {index} reaches the matrix axes of a FactoredMatrix of shape {tuple(self.shape)}; index "
                "the leading axes, or take .AB first"
            )
        return FactoredMatrix(self.A[index], self.B[index])

    def __repr__(self) -> str:
        return f"FactoredMatrix: Shape({self.shape}), Hidden Dim({self.mdim})"
