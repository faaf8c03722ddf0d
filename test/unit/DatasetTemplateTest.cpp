//===- DatasetTemplateTest.cpp - datasets' prompt templates ---------------===//
//
// A dataset's `template` renders each row's prompt from its columns when the
// file is read: placeholders, brace escapes, the columns it reads, and the
// errors for malformed text and rows without a column.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Dataset.h"
#include "rlhf/runtime/Error.h"

#include <gtest/gtest.h>

#include <fstream>

using rlhf::Example;
using rlhf::JsonlDataset;
using rlhf::PromptTemplate;

namespace {

std::string tmpPath(const std::string &name) {
  return std::string(::testing::TempDir()) + "/rlhf-template-" + name;
}

/// The message of the rlhf::Error that `f` throws, or "" when it does not.
template <typename F> std::string errorOf(F &&f) {
  try {
    f();
  } catch (const rlhf::Error &e) {
    return e.what();
  }
  return "";
}

TEST(PromptTemplate, FillsPlaceholdersAndEscapes) {
  PromptTemplate t("{{Q}}: {question}\n{{{question}}} {n}/{n}");
  EXPECT_EQ(t.columns(), (std::vector<std::string>{"question", "n"}));
  Example row{{"question", "2+2?"}, {"n", "7"}, {"unused", "x"}};
  EXPECT_EQ(t.render(row), "{Q}: 2+2?\n{2+2?} 7/7");
  // Field text is inserted as is: braces in it are not placeholders.
  EXPECT_EQ(t.render({{"question", "{n}"}, {"n", "}}"}}),
            "{Q}: {n}\n{{n}} }}/}}");
  EXPECT_EQ(PromptTemplate("no fields").render({}), "no fields");
  EXPECT_TRUE(PromptTemplate("}}{{").columns().empty());
  EXPECT_EQ(PromptTemplate("}}{{").render({}), "}{");
}

TEST(PromptTemplate, MalformedTextIsAnError) {
  EXPECT_NE(errorOf([] { PromptTemplate t("a {b"); }).find("unclosed '{'"),
            std::string::npos);
  EXPECT_NE(errorOf([] { PromptTemplate t("a {b{c}"); }).find("unclosed '{'"),
            std::string::npos);
  EXPECT_NE(errorOf([] { PromptTemplate t("a } b"); }).find("stray '}'"),
            std::string::npos);
  EXPECT_NE(errorOf([] { PromptTemplate t("a {}"); }).find("empty placeholder"),
            std::string::npos);
  EXPECT_NE(errorOf([] {
              PromptTemplate("{x}").render({{"y", "1"}});
            }).find("missing field \"x\", which the prompt template uses"),
            std::string::npos);
}

TEST(PromptTemplate, DatasetRendersEveryRow) {
  std::string path = tmpPath("gsm.jsonl");
  std::ofstream(path) << "{\"question\": \"1+1\", \"answer\": \"2\"}\n"
                         "\n"
                         "{\"question\": \"a \\\"b\\\"\", \"answer\": 3}\n"
                         "{\"question\": 4.5, \"answer\": \"x\", \"id\": 1}\n";
  PromptTemplate t("Question: {question}\nAnswer:");
  JsonlDataset ds(path, {"prompt", "answer"}, &t);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[0].at("prompt"), "Question: 1+1\nAnswer:");
  EXPECT_EQ(ds[1].at("prompt"), "Question: a \"b\"\nAnswer:");
  EXPECT_EQ(ds[2].at("prompt"), "Question: 4.5\nAnswer:");
  EXPECT_EQ(ds[1].at("answer"), "3");
  // The columns stay beside the prompt (script_reward sends them).
  EXPECT_EQ(ds[0].at("question"), "1+1");
  EXPECT_EQ(ds[0].count("id"), 0u);

  // A template may wrap a column named 'prompt'.
  std::string wrapped = tmpPath("wrapped.jsonl");
  std::ofstream(wrapped) << "{\"prompt\": \"3+4=\"}\n";
  PromptTemplate w("<{prompt}>");
  JsonlDataset wd(wrapped, {"prompt"}, &w);
  EXPECT_EQ(wd[0].at("prompt"), "<3+4=>");

  // Without a template the file reads as before.
  JsonlDataset plain(wrapped, {"prompt"});
  EXPECT_EQ(plain[0].at("prompt"), "3+4=");
}

TEST(PromptTemplate, RowWithoutAColumnNamesItsLine) {
  std::string path = tmpPath("missing.jsonl");
  std::ofstream(path) << "{\"question\": \"q\", \"answer\": \"a\"}\n"
                         "\n"
                         "{\"answer\": \"a\"}\n";
  PromptTemplate t("Q: {question}");
  EXPECT_NE(
      errorOf([&] {
        JsonlDataset ds(path, {"prompt", "answer"}, &t);
      })
          .find("rlhf-template-missing.jsonl:3: missing field \"question\", "
                "which the prompt template uses"),
      std::string::npos);
  // The record's own columns keep their plain message.
  std::string noAnswer = tmpPath("no-answer.jsonl");
  std::ofstream(noAnswer) << "{\"question\": \"q\"}\n";
  std::string msg = errorOf([&] {
    JsonlDataset ds(noAnswer, {"prompt", "answer"}, &t);
  });
  EXPECT_NE(msg.find(":1: missing field \"answer\""), std::string::npos);
  EXPECT_EQ(msg.find("prompt template"), std::string::npos) << msg;
}

} // namespace
