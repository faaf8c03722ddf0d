//===- DatasetRowsTest.cpp - the tensors a program loads from its rows ----===//
//
// Unpaired feedback rows (KTO's prompt, completion and label): the label is
// one float per row, and kl_completion pairs each row's prompt with the next
// row's completion, which a test of metrics alone could not tell from the
// row's own.
//
//===----------------------------------------------------------------------===//

#include "FnTestUtil.h"

using namespace rlhf;
using namespace rlhf::fntest;

namespace {

/// Where row `b`'s completion starts and how long it is (eos included), by
/// its mask: position j predicts token j + 1.
std::pair<int64_t, int64_t> span(const at::Tensor &mask, int64_t b) {
  at::Tensor on = mask[b].nonzero();
  if (on.numel() == 0)
    return {0, 0};
  return {on[0].item<int64_t>() + 1, on.size(0)};
}

TEST(DatasetRows, KtoRowsPairEachPromptWithTheNextCompletion) {
  OneRankJob job("dataset-rows", 2, 1);
  rlhf_prog *p = job.p;
  {
    // Completions of different lengths, so that a row's own and the next
    // row's cannot agree by chance; labels as bools and numbers.
    std::ofstream data(job.dir / "feedback.jsonl");
    // Eight rows: the two steps' batches of 4 are one epoch, with no row
    // twice.
    const char *rows[][3] = {{"ab?", " x", "true"},    {"bcd?", " yy", "false"},
                             {"c?", " zzz", "0.5"},    {"dab?", " w", "-1"},
                             {"ea?", " vvvv", "true"}, {"f?", " uu", "0"},
                             {"gb?", " ttt", "false"}, {"hc?", " s", "true"}};
    for (auto &r : rows)
      data << "{\"prompt\": \"" << r[0] << "\", \"completion\": \"" << r[1]
           << "\", \"label\": " << r[2] << "}\n";
  }
  const int64_t arch[] = {2, 64, 4, 2, 176, 512, 64, 0, 0, 0};
  const int64_t lay[] = {0, 1, 1, 1, 2, 1, 1};
  rlhf_prog_add_model(p, "policy", arch, 1, 1e-3, 0.9, 0.95, 1.0, 0.0, 1.0,
                      nullptr, lay);
  const int64_t B = 4, P = 5, R = 6;
  rlhf_prog_add_dataset(p, "feedback",
                        (job.dir / "feedback.jsonl").string().c_str(), B, P, R,
                        "prompt,completion,label,kl_completion");
  const int64_t step = rlhf_prog_start(p);
  for (int64_t s = step; s < step + 2; ++s) {
    rlhf_step_begin(p, s);
    rlhf_value *rec = rlhf_load(p, 0, s, B);
    ASSERT_NE(rec, nullptr);
    rlhf_value *c = rlhf_field(p, rec, "completion"),
               *kl = rlhf_field(p, rec, "kl_completion"),
               *label = rlhf_field(p, rec, "label");
    ASSERT_EQ(kl->t.sizes(), c->t.sizes());
    ASSERT_EQ(kl->t.size(1), P + R);
    ASSERT_TRUE(kl->mask.defined());
    const int64_t pad = p->tokenizer->pad();
    for (int64_t b = 0; b < B; ++b) {
      auto [start, len] = span(c->mask, b);
      auto [nextStart, nextLen] = span(c->mask, (b + 1) % B);
      ASSERT_GT(len, 0) << "row " << b;
      // Row b's prompt, then row b+1's completion, then padding; its mask
      // covers that completion.
      at::Tensor want = at::full({P + R}, pad, at::kLong);
      want.narrow(0, 0, start).copy_(c->t[b].narrow(0, 0, start));
      want.narrow(0, start, nextLen)
          .copy_(c->t[(b + 1) % B].narrow(0, nextStart, nextLen));
      EXPECT_TRUE(at::equal(kl->t[b].to(at::kLong), want))
          << "step " << s << " row " << b << ": " << kl->t[b] << " want "
          << want;
      EXPECT_EQ(span(kl->mask, b), std::make_pair(start, nextLen))
          << "step " << s << " row " << b;
      EXPECT_FALSE(at::equal(kl->t[b], c->t[b])) << "row " << b;
    }
    // Labels: true 1, false 0, numbers as written; one per row, unmasked.
    ASSERT_EQ(label->t.dim(), 1);
    ASSERT_EQ(label->t.size(0), B);
    EXPECT_EQ(label->t.scalar_type(), at::kFloat);
    EXPECT_FALSE(label->mask.defined());
    for (int64_t b = 0; b < B; ++b) {
      const float l = label->t[b].item<float>();
      EXPECT_TRUE(l == 1.f || l == 0.f || l == 0.5f || l == -1.f) << l;
    }
    rlhf_step_end(p, s);
  }
  EXPECT_EQ(rlhf_prog_finish(p), 0);
}

} // namespace
