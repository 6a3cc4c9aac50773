// The operator catalogue (common/naming/operator_catalogue.h): the built-in data classifies the
// operators the agent and the server rely on, a user's file adds to it, and a malformed or
// conflicting file is refused naming the file and the key.
#include "common/naming/operator_catalogue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

namespace parity::common {
namespace {

using ::testing::HasSubstr;

TEST(OperatorCatalogueTest, TheBuiltInCatalogueClassifiesTheOperatorsBothSidesRelyOn) {
  const OperatorCatalogue c = OperatorCatalogue::BuiltIn();
  EXPECT_EQ(c.SkipReason("aten::empty"),
            "aten::empty returns uninitialised output; nothing to compare");
  EXPECT_EQ(c.SkipReason("resize_"), "resize_ returns uninitialised output; nothing to compare");
  EXPECT_EQ(c.SkipReason("aten::add"), "");
  EXPECT_TRUE(c.IsCommunication("c10d::allreduce_"));
  EXPECT_TRUE(c.IsCommunication("_c10d_functional::all_reduce"));
  EXPECT_TRUE(c.IsCommunication("aten::all_reduce"));
  EXPECT_FALSE(c.IsCommunication("aten::add"));
  EXPECT_FALSE(c.IsCommunication("c10dx::op"));
  EXPECT_EQ(c.RandomFamilyOf("aten::dropout"), RandomFamily::kDropout);
  EXPECT_EQ(c.RandomFamilyOf("npu::dropout"), RandomFamily::kDropout);  // bare names
  EXPECT_EQ(c.RandomFamilyOf("aten::randn_like"), RandomFamily::kNormal);
  EXPECT_EQ(c.RandomFamilyOf("aten::binomial"), RandomFamily::kUnchecked);
  EXPECT_EQ(c.RandomFamilyOf("aten::gelu"), RandomFamily::kNone);
  const std::vector<std::string> names = c.RandomOpNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.size(), 36u);
}

TEST(OperatorCatalogueTest, EveryFamilyHasANameAndAnOperator) {
  const OperatorCatalogue c = OperatorCatalogue::BuiltIn();
  std::set<RandomFamily> seen;
  for (const std::string& op : c.RandomOpNames()) seen.insert(c.RandomFamilyOf(op));
  for (int f = 1; f <= static_cast<int>(RandomFamily::kUnchecked); ++f) {
    const auto family = static_cast<RandomFamily>(f);
    EXPECT_FALSE(RandomFamilyName(family).empty()) << f;
    EXPECT_EQ(seen.count(family), 1u) << RandomFamilyName(family);
  }
  EXPECT_EQ(RandomFamilyName(RandomFamily::kNone), "");
}

TEST(OperatorCatalogueTest, AMalformedFileIsRefusedNamingTheKey) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "mine.json: not a JSON object"},
           {"[1]", "mine.json: not a JSON object"},
           {R"({"randoms": {}})", "randoms: not a catalogue section"},
           {R"({"version": 2})", "version: only 1 is known"},
           {R"({"random": {"gaussian": ["my_randn"]}})", "random.gaussian: no such family"},
           {R"({"random": {"normal": "my_randn"}})", "random.normal: expected a list"},
           {R"({"random": {"normal": [""]}})", "random.normal: expected operator names"},
           {R"({"communication": {"groups": ["x"]}})", "communication.groups: only"},
           {R"({"random": {"normal": ["a"], "uniform": ["a"]}})", "listed twice: a"},
           {R"({"random": {"normal": ["a"]}, "never_replayed": {"junk": ["a"]}})",
            "listed twice: a"}}) {
    absl::StatusOr<OperatorCatalogue> c = OperatorCatalogue::Parse(text, "mine.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(expected)) << text;
    EXPECT_THAT(c.status().message(), HasSubstr("mine.json")) << text;
  }
}

TEST(OperatorCatalogueTest, AUserFileAddsOperatorsAndMayNotReclassifyBuiltInOnes) {
  OperatorCatalogue c = OperatorCatalogue::BuiltIn();
  auto mine = OperatorCatalogue::Parse(
      R"({"random": {"dropout": ["my_fused_dropout", "dropout"]},
          "never_replayed": {"scratch buffer": ["my_alloc"]},
          "communication": {"namespaces": ["mycomm"], "operators": ["mylib::gather"]}})",
      "mine.json");
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(c.Add(*mine, "mine.json").ok());
  ASSERT_TRUE(c.Add(*mine, "mine.json").ok()) << "the same entries again are no conflict";
  EXPECT_EQ(c.RandomFamilyOf("mylib::my_fused_dropout"), RandomFamily::kDropout);
  EXPECT_EQ(c.SkipReason("mylib::my_alloc"),
            "mylib::my_alloc returns scratch buffer; nothing to compare");
  EXPECT_TRUE(c.IsCommunication("mycomm::broadcast"));
  EXPECT_TRUE(c.IsCommunication("mylib::gather"));
  EXPECT_EQ(c.RandomFamilyOf("aten::randperm"), RandomFamily::kRandperm);  // built-ins stay
  auto clash = OperatorCatalogue::Parse(
      R"({"random": {"normal": ["dropout"]}, "never_replayed": {"junk": ["randperm"]}})",
      "clash.json");
  ASSERT_TRUE(clash.ok()) << clash.status();
  const absl::Status added = c.Add(*clash, "clash.json");
  EXPECT_EQ(added.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(added.message(), HasSubstr("clash.json"));
  EXPECT_THAT(added.message(), HasSubstr("randperm"));
  EXPECT_THAT(added.message(), HasSubstr("dropout"));
  EXPECT_EQ(c.RandomFamilyOf("aten::dropout"), RandomFamily::kDropout) << "nothing added";
}

TEST(OperatorCatalogueTest, TheProcessCatalogueTakesAFileAndRefusesABadOne) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/parity_catalogue_good.json";
  std::ofstream(good) << R"({"random": {"uniform": ["my_uniform_"]}})";
  EXPECT_EQ(RandomFamilyOf("mylib::my_uniform_"), RandomFamily::kNone);
  ASSERT_TRUE(AddToOperatorCatalogue(good).ok());
  EXPECT_EQ(RandomFamilyOf("mylib::my_uniform_"), RandomFamily::kUniform);
  EXPECT_EQ(RandomFamilyOf("aten::uniform_"), RandomFamily::kUniform);
  const absl::Status missing = AddToOperatorCatalogue(dir + "/parity_no_such_catalogue.json");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("parity_no_such_catalogue.json"));
  const std::string bad = dir + "/parity_catalogue_bad.json";
  std::ofstream(bad) << R"({"random": {"uniform": ["empty"]}})";  // built in as never replayed
  const absl::Status refused = AddToOperatorCatalogue(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("parity_catalogue_bad.json"));
  EXPECT_EQ(RandomFamilyOf("aten::empty"), RandomFamily::kNone) << "nothing added";
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace parity::common
