// An epilogue that reads the product at a second column: a rotary embedding's rotated half.
//
// transformers' rotary embedding computes q·cos + rotate_half(q)·sin over each head of D
// columns, rotate_half(q) = concat(-q[D/2:], q[:D/2]): column c also reads column c + D/2 or
// c - D/2 of the same row — c XOR D/2 where D is a power of two and heads start at multiples
// of D. Lowered, the concat loads both halves at clamped columns and selects by the column's
// position, so the loads' indices are not the product's position but, wherever the select
// keeps them, its partner column.
//
// The GEMM template's accumulator fragment gives every thread the same columns of each group
// of 8 (wgmma's layout: column 8j + 2·(lane % 4) + e for every j), so the thread that holds
// column c holds c XOR P too, for P a multiple of 8 inside the tile: the epilogue reads the
// partner from registers where a tile's columns are whole multiples of 2P.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct PartnerColumns {
  int64_t distance = 0;     // P: column c reads column c XOR P (a power of two, a multiple of 8)
  std::vector<int> loads;   // the epilogue's values that load the partner
};

// `epilogue` is a pointwise Kernel over the product's rows (loop variable 0) and columns
// (variable 1) of an [rows][n] product; `shifted` are its loads of the product that are not
// at the product's position. Proven by evaluating the program's indices and selects at every
// column of a few rows: each shifted load, wherever a store's value depends on it, reads the
// same row at column c XOR P, one P for all. Else the reason.
StatusOr<PartnerColumns> FindPartnerColumns(const Kernel& epilogue, int64_t rows, int64_t n, const std::vector<int>& shifted);

}  // namespace tilefuse
