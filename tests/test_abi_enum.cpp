// core/abi_enum.hpp: an ABI enum's one name table, the checked casts between the enum and the
// ABI's int32, and the compile-time checks of maps onto other vocabularies.
#include <gtest/gtest.h>

#include <string>

#include "core/abi_enum.hpp"
#include "core/fields.hpp"

namespace opcts {
namespace {

// Values as a C header would give them: not dense, not in declaration order.
enum { kAbiRed = 4, kAbiGreen = 2, kAbiBlue = 9 };
enum class Colour : int32_t { red = kAbiRed, green = kAbiGreen, blue = kAbiBlue };
constexpr std::array<EnumName<Colour>, 3> kColourNames{
    {{Colour::red, "red", ""}, {Colour::green, "green", "g"}, {Colour::blue, "blue", "b"}}};
constexpr const auto& enum_names(Colour) { return kColourNames; }

enum class Dense : int32_t { a = 0, b = 1, c = 2 };
constexpr std::array<EnumName<Dense>, 3> kDenseNames{
    {{Dense::a, "a", "a"}, {Dense::b, "b", "b"}, {Dense::c, "c", "c"}}};
constexpr const auto& enum_names(Dense) { return kDenseNames; }

static_assert(abi_value(Colour::blue) == kAbiBlue);
static_assert(abi_names<Colour>(kAbiGreen) && !abi_names<Colour>(0));
static_assert(abi_distinct<Colour>() && !abi_dense<Colour>() && abi_dense<Dense>());
static_assert(enum_name(Colour::green) == "green" && enum_id(Colour::red).empty());

enum class Shade { light, dark };
constexpr EnumMap<Colour, Shade, 3> kShades{
    {{Colour::red, Shade::dark}, {Colour::green, Shade::light}, {Colour::blue, Shade::dark}}};
static_assert(covers(kShades) && map_enum(kShades, Colour::green) == Shade::light);
constexpr EnumMap<Colour, Shade, 2> kShort{{{Colour::red, Shade::dark}, {Colour::green, Shade::light}}};
static_assert(!covers(kShort));  // a map that forgets an enumerator does not compile where it is asserted
constexpr EnumMap<Colour, Shade, 3> kReordered{
    {{Colour::green, Shade::light}, {Colour::red, Shade::dark}, {Colour::blue, Shade::dark}}};
static_assert(!covers(kReordered));

TEST(AbiEnum, FromAbiReturnsTheEnumeratorOfAValue) {
  for (const auto& n : kColourNames) EXPECT_EQ(from_abi<Colour>(abi_value(n.value), "colour"), n.value);
}

TEST(AbiEnum, ABadValueIsRefusedNamingTheField) {
  for (const int32_t bad : {0, 3, -1, kAbiBlue + 1}) {
    try {
      from_abi<Colour>(bad, "colour");
      ADD_FAILURE() << bad << " was read as a colour";
    } catch (const AbiValueError& e) {
      EXPECT_EQ(e.field, "colour");
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("colour = " + std::to_string(bad), 0), 0u) << what;
      EXPECT_NE(what.find("red = 4, green = 2, blue = 9"), std::string::npos) << what;
    }
  }
  EXPECT_THROW(from_abi<Dense>(3, "dense"), std::invalid_argument);
}

struct Paint {
  Colour colour = Colour::red;
};

TEST(AbiEnum, TheFieldTablesChoicesComeFromTheNameTable) {
  const auto cs = kit::choices_of<Colour>();
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(cs[1].value, Colour::green);
  EXPECT_EQ(cs[1].yaml, "green");
  EXPECT_EQ(cs[1].id, "g");
  const kit::Field<Paint> f = kit::enum_choice<Paint>("colour", &Paint::colour);
  EXPECT_EQ(f.doc, "red | green | blue");
  EXPECT_EQ(f.id, "[g|b]");
  Paint p;
  f.read(p, YAML::Load("{colour: blue}"));
  EXPECT_EQ(p.colour, Colour::blue);
  std::vector<std::string> tokens;
  f.write(p, tokens);
  EXPECT_EQ(tokens, std::vector<std::string>{"b"});
}

}  // namespace
}  // namespace opcts
