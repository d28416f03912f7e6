#include "dplace/core/fingerprint.h"

#include <gtest/gtest.h>

namespace dplace {
namespace {

TEST(FingerprintTest, BytesAreStandardFnv1a64) {
  // Reference values of 64-bit FNV-1a.
  EXPECT_EQ(Fingerprint().value(), 0xcbf29ce484222325ULL);
  Fingerprint a;
  a.add_bytes("a");
  EXPECT_EQ(a.value(), 0xaf63dc4c8601ec8cULL);
  Fingerprint foobar;
  foobar.add_bytes("foobar");
  EXPECT_EQ(foobar.value(), 0x85944171f73967e8ULL);
}

TEST(FingerprintTest, StringsAreLengthPrefixed) {
  Fingerprint ab_c, a_bc;
  ab_c.add("ab");
  ab_c.add("c");
  a_bc.add("a");
  a_bc.add("bc");
  EXPECT_NE(ab_c.value(), a_bc.value());
}

}  // namespace
}  // namespace dplace
