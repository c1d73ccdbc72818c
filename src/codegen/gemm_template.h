// The GEMM template's view of a gemm group: a TemplateKernel beside the loop Kernel IR.
//
//   operands   A [batch][M][K] (K contiguous) and B [batch][K][N] (N contiguous), read by
//              TMA straight from the graph values the product reads (views of the
//              layout below cost nothing; anything else is refused with the reason)
//   problem    rows × N × K per batch entry; when B is shared by every batch entry (a
//              weight), the batch entries of A fold into the rows: one big product
//   epilogue   the group's members after the product as a pointwise Kernel over the
//              product's rows (loop variable 0, batch entries folded in) and columns
//              (variable 1); its loads of the product read the accumulator instead
//
// The prologue (members before the product) is not part of the template: the backend
// materialises the operands it computes first, as it does for the library path.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "codegen/gemm_split.h"
#include "codegen/kernel.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// A read by TMA straight through a view of another value, as attention's merged heads are
// (transpose(attention, [0, 2, 1, 3]) reshaped to [batch, T, heads * d]): element (row,
// column) of A is source[offset + (column % head)·1 + (row % entry_rows)·stride[0] +
// (column / head)·stride[1] + (row / entry_rows)·stride[2]] — a rank-4 TMA map, so the
// prologue's copy of A is not made. Needs head % 64 == 0 (a K step stays in one head) and
// entry_rows a multiple of the row tile (a tile stays in one entry).
struct GemmOperandView {
  int node = -1;          // the value read
  int64_t offset = 0;     // elements
  int64_t head = 0;       // columns per head
  int64_t entry_rows = 0; // rows per batch entry
  int64_t heads = 1, entries = 1;
  std::array<int64_t, 3> stride{0, 0, 0};  // elements: row in entry, head, entry
};

// A read as an implicit GEMM: A is im2col of an NHWC activation (the channels-last
// convolution's lowering, passes/window_ops.h: reshape(transpose(window(transpose(source,
// [0, 3, 1, 2])), [0, 2, 3, 4, 5, 1]), [N·OH·OW, KH·KW·C])), so row m is output pixel
// (image, oh, ow) and column k is (kh, kw, channel). TMA's im2col mode loads each tile from
// the activation itself; the prologue's copy of A, KH·KW times the activation, is not made.
// Needs C % 64 == 0 (a K step stays in one filter tap).
struct GemmConvWindow {
  int node = -1;  // the activation, [N, H, W, C]
  int64_t images = 0, height = 0, width = 0, channels = 0;
  int64_t out_height = 0, out_width = 0;
  std::array<int64_t, 2> kernel{1, 1}, strides{1, 1}, dilations{1, 1};  // (h, w)
  std::array<int64_t, 4> pads{0, 0, 0, 0};                              // h begin, w begin, h end, w end
};

// An RMS norm of A's rows computed in the product's kernel (codegen/gemm_row_norms.h): the
// product reads the norm's input x (its `a`) and multiplies x normed, x · rsqrt(mean(x², over
// K) + epsilon) · scale[k], in place of the norm's output, which is never written.
struct GemmRowNorm {
  int normed = -1;  // the norm's output, the product's A as the graph has it
  int scale = -1;   // [K], of the operands' type
  float epsilon = 0.0f;
};

// A layer norm of A's rows computed in the skinny product's kernel (gemm_skinny_sm90.cuh's
// kNormA; codegen/gemm_row_norms.h): the product reads the norm's input x (its `a`) and writes
// A's tiles as ((x - mean) · rsqrt(variance + epsilon)) · scale + bias, the norm's output
// (`normed`) never written. An RMS norm (`rms`) likewise, as x · rsqrt(mean(x²) + epsilon) ·
// scale (no mean taken, no bias).
struct GemmLayerNorm {
  int normed = -1;
  int scale = -1, bias = -1;  // [K], of the operands' type; bias -1: none
  float epsilon = 0.0f;
  bool rms = false;
};

// The largest magnitude over the whole of one of the epilogue's outputs, max |u| (an amax, as
// FP8 scaling reads it: ReduceMax(Abs(u)) over every element; codegen/gemm_amax.h), computed in
// the epilogue as u is: each consumer thread keeps the largest |u| it computed, a warp's
// largest goes into scratch memory by an atomic max, and the last warp of the grid writes it.
struct GemmAmax {
  int value = -1;                // u, an output of the epilogue
  int scalar = -1;               // u's value in the epilogue's scalar program
  DType value_dtype = DType::kF32;  // u's stored type: |u| is taken of u rounded to it
  bool stored = true;            // u also written to memory (read elsewhere, or a graph output)
  int output = -1;               // the amax's node, one element
  DType dtype = DType::kF32;     // its type (u's, or wider)
};

struct GemmTemplateKernel {
  std::string name;
  DType dtype = DType::kBF16;  // of the product; accumulation in f32
  // Of A and B: the product's own, or an 8-bit float (e4m3, e5m2) for an f32 product
  // (passes/fp8_products.h).
  DType operand_dtype = DType::kBF16;
  int product = -1;            // the MatMul node
  int a = -1, b = -1;          // its operands
  int64_t rows = 0;            // per batch entry (M, or batch × M when folded)
  int64_t n = 0, k = 0;
  int64_t batch = 1;           // entries with their own A and B
  bool store_product = false;  // the product itself is a group output
  Kernel epilogue;             // its stores are the group's outputs
  std::vector<int> outputs;    // the group's outputs
  std::optional<GemmOperandView> a_view;  // A read through a view (its prologue copy skipped)
  std::optional<GemmConvWindow> a_conv;   // A as im2col of an activation (its prologue copy skipped)
  // B read K-major from the [N][K] value its prologue only transposes (x · wᵀ with w as a
  // linear layer keeps it), its prologue copy skipped; -1: B as [K][N].
  int b_k_major = -1;
  // Rows of that [N][K] value where it has fewer than N: the prologue only appends zero rows
  // to it (passes/column_padding_into_products.h: logits padded to 16-byte rows), which TMA's
  // out-of-bounds fill supplies; 0: N rows.
  int64_t b_rows = 0;
  // The rows of B's K-major value in memory, as its TMA map reads them.
  int64_t BRowsInMemory() const { return b_rows ? b_rows : n; }
  // Rows of K of B read [K][N] where its value has fewer than K: its prologue only appends
  // zero rows (an LM head's weight under a vocabulary padded to 16-byte rows), which TMA's
  // out-of-bounds fill supplies; B is then that value; 0: K rows.
  int64_t b_k_rows = 0;
  int64_t BKRowsInMemory() const { return b_k_rows ? b_k_rows : k; }
  // A read MN-major from the [K][M] value its prologue only transposes (xᵀ · dy, a linear
  // layer's weight gradient), its prologue copy skipped; -1: A as [M][K].
  int a_mn_major = -1;
  // B as read (b_k_major, else b) is a model input or a constant: no kernel of the model
  // writes it, so the template may load it before the kernel ahead of it has finished.
  bool b_read_only = false;
  // An f32 product without TF32 (--precision highest): each operand split into TF32 big and
  // small parts, three TF32 products summed (3xTF32), f32's accuracy on the tensor cores.
  bool split_f32 = false;
  // An f32 output at the product's position staged like a 16-bit one: written into the staging
  // tile (boxes of 64 rows x 32 columns), out by TMA (gemm_layout::StagedStore). Asked for
  // (TILEFUSE_GEMM_F32_STAGED=1) until measured: element stores of f32 outputs left ResNet-50's
  // TF32 1x1 products at 2-3x their bytes' time where bf16's staged ones ran at it.
  bool stage_f32_output = false;
  // A product grouped over N (codegen/gemm_n_groups.h): products of one A by up to four
  // weights (a layer's q, k and v of one normed input) as one kernel, their columns side by
  // side. Each part is a whole product of its own (its weight, epilogue and outputs); a tile's
  // columns lie in one part, whose B map and epilogue it takes. Here n is the parts' sum, the
  // epilogue is empty, and b_k_major, b and product are the first part's. Empty: one product.
  std::vector<GemmTemplateKernel> n_parts;
  // A gated product (codegen/gemm_gates.h): another product of the same A, rows, N and K whose
  // epilogue's one output only this epilogue reads, element by element at the product's
  // position (a gated linear unit's gate: silu(x·W_gate) ⊙ x·W_up), computed in the same
  // tiles: a tile's first half of columns by the gate's weight, the second half by this
  // product's, at the same columns of N, so each thread holds a column of both. The gate's
  // output is never stored: its value reaches this epilogue in registers (its loads of
  // gate_value read it). Zero or one element.
  std::vector<GemmTemplateKernel> gate;
  int gate_value = -1;
  // This is such a gate: its epilogue's output stays in registers (its buffer is not passed).
  bool output_in_registers = false;
  // The epilogue's loads of the product at column c XOR partner where it computes column c
  // (a rotary embedding's rotated half; codegen/gemm_partner_columns.h): the thread holding
  // column c holds its partner when a tile's columns are whole multiples of 2·partner.
  // 0: none (partner_loads, if any, are never used).
  int64_t partner = 0;
  std::vector<int> partner_loads;
  // A normed by rows in the kernel; unset: A as read.
  std::optional<GemmRowNorm> row_norm;
  // A a layer norm of x computed in the skinny template's kernel; unset: A as read.
  std::optional<GemmLayerNorm> layer_norm;
  // A block-scaled FP8 product (block_scaled_matmul): its scales, A's [rows][blocks] and B's
  // [blocks][N] (f32, in memory), each block scaling K / blocks columns of K; -1, 0: none.
  int block_scale_a = -1, block_scale_b = -1;
  int64_t scale_blocks = 0;
  // B's scales shared by aligned runs of this many columns of N (128: DeepGEMM's weights, one
  // scale a 128x128 block, which ONNX's blocked DequantizeLinear writes as a constant scale
  // repeated over 128 columns); 0: a scale each column.
  int64_t b_scale_columns = 0;
  // What `rows` is in the model's symbolic dims (batch · sequence: ir/symbolic_shapes.h), and
  // the symbols' values: the emitter passes such rows at launch (a constant: `rows` itself).
  SymExpr rows_size;
  std::vector<int64_t> symbols;
  // The amax of one of the epilogue's outputs computed in the kernel; unset: none.
  std::optional<GemmAmax> amax;
};
constexpr int64_t kWeightScaleColumns = 128;  // GemmTemplateKernel::b_scale_columns when B's scales are shared

// The template form of gemm `group`, or the reason it does not apply (the caller keeps
// the library path and reports the reason): operand dtype, alignment for TMA (rows of A and
// B whole 16-byte units), batch broadcasting, or an epilogue that reads the product through
// a view other than a partner column. bf16 and f16 products always; f32 ones on the TF32 tensor cores, with `tf32`
// (--precision high) as TF32, else as 3xTF32 (split_f32), whose operands are read K-major only: B must be the [N][K] value its
// prologue transposes (a linear layer's weight; passes/k_major_weights.h stores constant
// weights so), A a plain [M][K] matrix. Products of 8-bit floats (an f32 product of e4m3 or
// e5m2 operands) likewise, on the FP8 tensor cores.
// With `symbolic` (the graph's InferSymbolicShapes), the kernel knows its rows in the model's
// symbolic dims (GemmTemplateKernel::rows_size).
StatusOr<GemmTemplateKernel> LowerGemmTemplate(const Graph& graph, const FusionGroup& group, const GemmSplit& split,
                                               const std::vector<bool>& inlined, bool tf32 = false,
                                               const SymbolicShapes* symbolic = nullptr);
// Does `index`, over the epilogue's (row 0, column 1), address element (row, column) of a
// [rows][N] value laid out as the product is? (Where a TMA tile of the product's can move
// it, and where a library writes its output.)
bool AtProductPosition(const GemmTemplateKernel& gemm, const Index& index);
// Does `index`, over the epilogue's (row 0, column 1), address each column pair (c, c + 1), c
// even, as two consecutive elements from an even offset? (Where the epilogue can move a pair
// as one word: the product's position, a rotary table's [token][d], a key stored transposed
// into [batch, heads, tokens, d].) Checked at every even column of a few rows, up to 16384
// columns.
bool PairsAreAdjacent(const GemmTemplateKernel& gemm, const Index& index);

// The same problem and epilogue without the template's own limits (dtype, TMA alignment):
// what the library path asks of a gemm group too (gemm_library_epilogue.h).
StatusOr<GemmTemplateKernel> LowerGemmProblem(const Graph& graph, const FusionGroup& group, const GemmSplit& split,
                                              const std::vector<bool>& inlined);

}  // namespace tilefuse
