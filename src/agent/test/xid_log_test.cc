#include "agent/xid_log.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "agent/gpu_collector.h"
#include "agent/test/test_dir.h"

namespace chamber::agent {
namespace {

TEST(XidLogTest, ParsesFallenOffTheBus) {
  auto e = ParseXidLine("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pci_bus_id, "0000:3b:00");
  EXPECT_EQ(e->xid, 79u);
  EXPECT_EQ(e->pid, 1234);
  EXPECT_EQ(e->message, "pid=1234, GPU has fallen off the bus.");
}

TEST(XidLogTest, ParsesKmsgRecord) {
  auto e = ParseXidLine(
      "4,1523,5123456789,-;NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, "
      "GPU has fallen off the bus.");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pci_bus_id, "0000:2b:00");
  EXPECT_EQ(e->xid, 79u);
  EXPECT_FALSE(e->pid);
}

TEST(XidLogTest, ParsesDmesgLineWithTimestamp) {
  auto e = ParseXidLine(
      "[ 9123.456789] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked "
      "for remapping, reset gpu to activate.");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pci_bus_id, "0000:10:1c");
  EXPECT_EQ(e->xid, 63u);
  EXPECT_EQ(e->pid, 1896);
}

TEST(XidLogTest, ParsesSyslogLineAndQuotedPid) {
  auto e = ParseXidLine(
      "Oct 15 12:40:10 node-7 kernel: NVRM: Xid (PCI:0000:06:00): 13, pid='12345', "
      "name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pci_bus_id, "0000:06:00");
  EXPECT_EQ(e->xid, 13u);
  EXPECT_EQ(e->pid, 12345);
}

// Found by the xid_log fuzz harness: a pid of many digits overflowed `long` (undefined
// behaviour). The Xid still reads; such a pid is no pid.
TEST(XidLogTest, PidTooLongIsNoPid) {
  auto e = ParseXidLine(
      "[ 8246.656789] NVRM: Xid (PCI:0000:10:1c): 63, pid=33333333333333333333333333333331896, "
      "Row Remapper");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->xid, 63u);
  EXPECT_FALSE(e->pid.has_value());
  e = ParseXidLine("NVRM: Xid (PCI:0000:10:1c): 63, pid=1073741824, x");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pid, 1073741824);
  e = ParseXidLine("NVRM: Xid (PCI:0000:10:1c): 63, pid=10737418240, x");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->pid.has_value());
}

TEST(XidLogTest, ParsesOlderFormatWithoutPciPrefix) {
  auto e = ParseXidLine(
      "[  966.503025] NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pci_bus_id, "0000:01:00");
  EXPECT_EQ(e->xid, 31u);
  EXPECT_EQ(e->message, "Ch 0000000b, engmask 00000120, intr 10000000");
}

TEST(XidLogTest, ParsesRecoveryActionXid) {
  auto e = ParseXidLine(
      "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
      "(GPU Reset Required)\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->xid, 154u);
  EXPECT_EQ(e->message.back(), ')');
}

TEST(XidLogTest, RejectsOtherLines) {
  EXPECT_FALSE(ParseXidLine(""));
  EXPECT_FALSE(ParseXidLine("NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd"));
  EXPECT_FALSE(ParseXidLine("NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus."));
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (43, pid: 5678): ROBUST_CHANNEL_RESETCHANNEL"));
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:0000:2b:00): , no number"));
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:zz:2b:00): 79, bad address"));
  EXPECT_FALSE(ParseXidLine("usb 1-1: new high-speed USB device number 2"));
}

TEST(XidLogTest, ScansAFileOfDmesgLines) {
  std::string path = test::TestPath("xid_dmesg.txt");
  {
    std::ofstream out(path);
    out << "[    0.000000] Linux version 6.1.0-18-amd64\n"
        << "[  120.1] NVRM: GPU at PCI:0000:3b:00: GPU-5a1e\n"
        << "[  120.2] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"
        << "[  130.0] NVRM: Xid (PCI:0000:5e:00): 48, pid=77, An uncorrectable double bit error\n"
        << "[  140.0] NVRM: Xid (PCI:0000:5e:00): 13, pid=78, Graphics Exception";  // no newline
  }
  auto entries = ScanKernelLog(path);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].xid, 79u);
  EXPECT_EQ((*entries)[1].xid, 48u);
  EXPECT_EQ((*entries)[1].pci_bus_id, "0000:5e:00");
  EXPECT_EQ((*entries)[2].xid, 13u);
  std::remove(path.c_str());
}

TEST(XidLogTest, MissingLogIsNotFound) {
  auto entries = ScanKernelLog("/nonexistent/kmsg");
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), StatusCode::kNotFound);
  EXPECT_NE(entries.status().message().find("/nonexistent/kmsg"), std::string::npos);
}

TEST(PciAddressTest, MatchesNvmlAndKernelSpellings) {
  auto nvml = ParsePciAddress("00000000:3B:00.0");
  auto kernel = ParsePciAddress("0000:3b:00");
  ASSERT_TRUE(nvml);
  ASSERT_TRUE(kernel);
  EXPECT_EQ(*nvml, *kernel);
  EXPECT_EQ(nvml->bus, 0x3bu);
  EXPECT_FALSE(ParsePciAddress("0000:3c:00") == nvml);
  EXPECT_FALSE(ParsePciAddress("GPU-1234"));
  EXPECT_FALSE(ParsePciAddress("0000:3b"));
}

}  // namespace
}  // namespace chamber::agent
