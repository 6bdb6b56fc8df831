// A real two-node Slurm cluster on one machine for tests: Debian's slurmctld, two slurmd and munged,
// the nodes n1 and n2 in two network namespaces joined by a veth pair (tests/support/netns_pair.h),
// slurmctld beside n1. Batch jobs are submitted in n1's namespace and run on the nodes as on any
// Slurm site. The daemons enter the namespaces with nsenter (only the network: `ip netns exec` would
// hide the cgroup file systems that proctrack/cgroup needs). Processes of a job are tracked with
// proctrack/cgroup where cgroup v1's freezer is mounted (what sites run: the allocation's end kills
// every process of the job), else proctrack/linuxproc (`tracks_every_process()` is false).
// unavailable() names why it cannot run (not root, a package missing, no namespaces); everything is
// stopped and deleted on destruction.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/netns_pair.h"
#include "tests/support/run_command.h"

namespace troupe::testing {

class SlurmCluster {
 public:
  // `dir`: an empty directory for the configuration, state, spool and logs.
  explicit SlurmCluster(std::string dir)
      : dir_(std::move(dir)), net_("10.233.7.1", "10.233.7.2", "s" + std::to_string(::getpid() % 100000)) {
    why_ = missing_parts();
    if (!why_.empty()) return;
    if (!net_.ok()) {
      why_ = "network namespaces cannot be made here: " + net_.error();
      return;
    }
    tracks_all_ = std::filesystem::exists("/sys/fs/cgroup/freezer");
    why_ = start();
  }
  ~SlurmCluster() {
    if (started_) {
      run("scancel --full --signal=KILL --user=root", 20);
      run("scancel --user=root", 20);
      for (int i = 0; i < 100 && run("squeue --noheader", 10).out.find_first_not_of(" \n") != std::string::npos; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (const char* pid_file : {"slurmd-n1.pid", "slurmd-n2.pid", "slurmctld.pid", "munged.pid"}) stop(dir_ + "/" + pid_file);
    // slurmd leaves its (empty) cgroups behind.
    if (started_ && tracks_all_)
      run_command("for d in /sys/fs/cgroup/*/slurm_n1 /sys/fs/cgroup/*/slurm_n2; do [ -d $d ] && find $d -depth -type d "
                  "-exec rmdir {} + ; done; true", 20);
  }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::string& unavailable() const { return why_; }
  bool tracks_every_process() const { return tracks_all_; }
  const std::string& dir() const { return dir_; }
  const NetnsPair& net() const { return net_; }

  // Runs `command` (Slurm's clients find the cluster through SLURM_CONF) in n1's namespace.
  CommandResult run(const std::string& command, int timeout_s = 60) const {
    return run_command(in_ns(net_.ns_a()) + " env SLURM_CONF=" + dir_ + "/slurm.conf " + command, timeout_s);
  }

  // The job's JobState once it left PENDING/RUNNING/COMPLETING ("COMPLETED", "FAILED", ...), or
  // "TIMEOUT-OF-TEST" at the deadline.
  std::string wait_job(const std::string& id, int timeout_s) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string state = job_state(id);
      if (!state.empty() && state != "PENDING" && state != "RUNNING" && state != "COMPLETING" && state != "CONFIGURING")
        return state;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return "TIMEOUT-OF-TEST";
  }

  std::string job_state(const std::string& id) const {
    const std::string out = run("scontrol show job -o " + id, 20).out;
    const auto at = out.find("JobState=");
    if (at == std::string::npos) return "";
    return out.substr(at + 9, out.find(' ', at) - at - 9);
  }

 private:
  static std::string in_ns(const std::string& ns) { return "nsenter --net=/var/run/netns/" + ns; }

  static std::string missing_parts() {
    if (::geteuid() != 0) return "slurmd and munged need root; run the suite as root";
    for (const char* p : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/sbin/mungekey",
                          "/usr/bin/sbatch", "/usr/bin/srun", "/usr/bin/nsenter"}) {
      if (!std::filesystem::exists(p))
        return std::string(p) + " is not installed (Debian packages slurmctld slurmd slurm-client munge util-linux; "
                                "scripts/install-deps.sh installs them)";
    }
    return "";
  }

  static void stop(const std::string& pid_file) {
    std::ifstream f(pid_file);
    pid_t pid = 0;
    if (!(f >> pid) || pid <= 0) return;
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 50 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::kill(pid, SIGKILL);
  }

  // Starts munged, slurmctld and the two slurmd; "" once both nodes are idle, else what failed.
  std::string start() {
    std::filesystem::create_directories(dir_ + "/state");
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    const std::string d = dir_;
    auto r = run_command("mungekey -c -b 1024 -k " + d + "/munge.key && munged --force -S " + d + "/munge.sock --key-file=" +
                             d + "/munge.key --pid-file=" + d + "/munged.pid --log-file=" + d + "/munged.log --seed-file=" +
                             d + "/munged.seed",
                         30);
    if (r.exit_code != 0) return "munged did not start: " + r.both() + slurp(d + "/munged.log");
    std::ofstream(d + "/slurm.conf")
        << "ClusterName=troupetest\nSlurmctldHost=" << host << "(" << net_.host_a() << ")\n"
        << "SlurmctldPort=6817\nSlurmdPort=6818\nAuthType=auth/munge\nAuthInfo=socket=" << d << "/munge.sock\n"
        << "CredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\nMailProg=/bin/true\n"
        << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool-%n\n"
        << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd-%n.pid\n"
        << "SlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d << "/slurmd-%n.log\n"
        << "ProctrackType=" << (tracks_all_ ? "proctrack/cgroup" : "proctrack/linuxproc") << "\n"
        << "TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n"
        << "SwitchType=switch/none\nMinJobAge=600\n"
        << "NodeName=n1 NodeAddr=" << net_.host_a() << " CPUs=2 State=UNKNOWN\n"
        << "NodeName=n2 NodeAddr=" << net_.host_b() << " CPUs=2 State=UNKNOWN\n"
        << "PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP\n";
    std::ofstream(d + "/cgroup.conf") << "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainCores=no\n"
                                         "ConstrainRAMSpace=no\nConstrainDevices=no\n";
    const std::string conf = " env SLURM_CONF=" + d + "/slurm.conf ";
    r = run_command(in_ns(net_.ns_a()) + conf + "slurmctld && " + in_ns(net_.ns_a()) + conf + "slurmd -N n1 && " +
                        in_ns(net_.ns_b()) + conf + "slurmd -N n2",
                    60);
    started_ = true;
    if (r.exit_code != 0) return "the Slurm daemons did not start: " + r.both() + slurp(d + "/slurmctld.log");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::string nodes;
    while (std::chrono::steady_clock::now() < deadline) {
      nodes = run("sinfo --noheader --format=%t:%D", 10).out;
      if (nodes.rfind("idle:2", 0) == 0) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return "the two slurmd were not idle within 60 s (sinfo: " + nodes + "); slurmctld.log ends: " +
           slurp(d + "/slurmctld.log").substr(0, 2000);
  }

  std::string dir_;
  NetnsPair net_;
  std::string why_;
  bool tracks_all_ = false;
  bool started_ = false;
};

}  // namespace troupe::testing
