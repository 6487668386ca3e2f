/*
 * proc.c - spawning, limiting and killing child processes.
 */
#include "ksearch/base/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"

/*
 * AddressSanitizer reserves terabytes of address space for its shadow
 * memory, so a process built with it cannot run under RLIMIT_AS.  In a
 * sanitized build (the test configuration) children get their other
 * limits and the caller's timeouts, but no address-space limit.
 */
#if defined(__SANITIZE_ADDRESS__)
#define KS_LIMIT_ADDRESS_SPACE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KS_LIMIT_ADDRESS_SPACE 0
#endif
#endif
#ifndef KS_LIMIT_ADDRESS_SPACE
#define KS_LIMIT_ADDRESS_SPACE 1
#endif

static char program[4096];

void ks_child_set_program(const char *path)
{
	snprintf(program, sizeof(program), "%s", path ? path : "");
}

const char *ks_child_program(void)
{
	if (!program[0]) {
		ssize_t n = readlink("/proc/self/exe", program, sizeof(program) - 1);

		program[n > 0 ? n : 0] = '\0';
	}
	return program;
}

/*
 * In the child, before exec: requests on stdin, replies on
 * KS_CHILD_REPLY_FD (non-blocking, so the child's writes keep their
 * deadlines), stdout on /dev/null.  Both pipe ends are first moved above
 * the standard fds so that neither dup2() can clobber the other.
 */
static int child_fds(int requests, int replies)
{
	int in = fcntl(requests, F_DUPFD_CLOEXEC, 10), out = fcntl(replies, F_DUPFD_CLOEXEC, 10);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (in < 0 || out < 0 || null < 0 || dup2(in, 0) < 0 || dup2(out, KS_CHILD_REPLY_FD) < 0 ||
	    dup2(null, 1) < 0)
		return -1;
	return fcntl(KS_CHILD_REPLY_FD, F_SETFL, fcntl(KS_CHILD_REPLY_FD, F_GETFL) | O_NONBLOCK);
}

int ks_child_spawn(struct ks_child *child, const char *const *args, const struct ks_child_limits *limits,
		   struct ks_error *err)
{
	const char *prog = ks_child_program();
	int in_pipe[2] = { -1, -1 }, out_pipe[2] = { -1, -1 }, exec_pipe[2] = { -1, -1 };
	size_t n_args = 0;
	const char **argv;
	int exec_errno = 0;
	pid_t pid, parent = getpid();

	memset(child, 0, sizeof(*child));
	child->to_child = child->from_child = -1;
	if (!prog[0])
		return ks_fail(err, "cannot find the ksearch executable to start a child process");
	while (args[n_args])
		n_args++;
	argv = ks_calloc(n_args + 2, sizeof(*argv));
	argv[0] = prog;
	for (size_t i = 0; i < n_args; i++)
		argv[i + 1] = args[i];
	/* the exec pipe closes on a successful exec and carries errno on a failed one */
	if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(exec_pipe, O_CLOEXEC)) {
		ks_fail(err, "cannot create pipes for a child process: %s", strerror(errno));
		goto fail;
	}
	/* a worker that dies must not kill us when we write to it */
	signal(SIGPIPE, SIG_IGN);
	pid = fork();
	if (pid < 0) {
		ks_fail(err, "cannot start a child process: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		/*
		 * Ctrl-C on the terminal is for the coordinator, which finishes
		 * the work in flight; and a child must not outlive it.
		 */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		if (child_fds(in_pipe[0], out_pipe[1]) < 0)
			goto child_fail;
		if (KS_LIMIT_ADDRESS_SPACE && limits && limits->address_space) {
			struct rlimit rl = { limits->address_space, limits->address_space };

			setrlimit(RLIMIT_AS, &rl);
		}
		if (limits && limits->cpu_seconds) {
			struct rlimit rl = { limits->cpu_seconds, limits->cpu_seconds + 5 };

			setrlimit(RLIMIT_CPU, &rl);
		}
		if (limits && limits->nice) {
			int current;

			errno = 0;
			current = getpriority(PRIO_PROCESS, 0);
			if (errno == 0)
				setpriority(PRIO_PROCESS, 0, current + limits->nice);
		}
		if (limits && limits->cpus)
			sched_setaffinity(0, sizeof(*limits->cpus), limits->cpus);
		signal(SIGPIPE, SIG_DFL);
		/*
		 * A signal sent to every process of a job (SLURM's scancel
		 * --signal, a launcher, kill on the group) is the coordinator's
		 * to act on: it finishes what its children are doing and ends
		 * them itself (SIGKILL, or the parent-death signal).  A GPU
		 * worker killed by it would record a good kernel as a crash.
		 */
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		execv(prog, (char *const *)argv);
	child_fail:
		exec_errno = errno;
		if (write(exec_pipe[1], &exec_errno, sizeof(exec_errno)) < 0)
			_exit(127);
		_exit(127);
	}
	close(in_pipe[0]);
	close(out_pipe[1]);
	close(exec_pipe[1]);
	in_pipe[0] = out_pipe[1] = exec_pipe[1] = -1;
	while (read(exec_pipe[0], &exec_errno, sizeof(exec_errno)) < 0 && errno == EINTR)
		;
	close(exec_pipe[0]);
	exec_pipe[0] = -1;
	if (exec_errno) {
		waitpid(pid, NULL, 0);
		ks_fail(err, "cannot run %s: %s", prog, strerror(exec_errno));
		goto fail;
	}
	/* our writes to it keep their deadlines too (ks_frame_write) */
	if (fcntl(in_pipe[1], F_SETFL, fcntl(in_pipe[1], F_GETFL) | O_NONBLOCK) < 0) {
		ks_fail(err, "cannot set up the pipe to a child process: %s", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto fail;
	}
	child->pid = pid;
	child->to_child = in_pipe[1];
	child->from_child = out_pipe[0];
	free(argv);
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (in_pipe[i] >= 0)
			close(in_pipe[i]);
		if (out_pipe[i] >= 0)
			close(out_pipe[i]);
		if (exec_pipe[i] >= 0)
			close(exec_pipe[i]);
	}
	free(argv);
	return -1;
}

static void close_pipes(struct ks_child *child)
{
	if (child->to_child >= 0)
		close(child->to_child);
	if (child->from_child >= 0)
		close(child->from_child);
	child->to_child = child->from_child = -1;
}

void ks_child_kill(struct ks_child *child)
{
	if (child->pid > 0) {
		kill(child->pid, SIGKILL);
		while (waitpid(child->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close_pipes(child);
	child->pid = 0;
}

void ks_child_finish(struct ks_child *child, int timeout_ms, int *status)
{
	int st = 0;

	if (child->to_child >= 0) {
		close(child->to_child);
		child->to_child = -1;
	}
	if (child->pid > 0) {
		for (int waited = 0;; waited += 10) {
			pid_t r = waitpid(child->pid, &st, WNOHANG);

			if (r == child->pid)
				break;
			if (r < 0 && errno != EINTR)
				break;
			if (waited >= timeout_ms) {
				kill(child->pid, SIGKILL);
				waitpid(child->pid, &st, 0);
				break;
			}
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
		}
	}
	if (status)
		*status = st;
	close_pipes(child);
	child->pid = 0;
}

char *ks_proc_which(const char *name)
{
	const char *path = getenv("PATH");
	char *dirs, *save = NULL, *found = NULL;

	if (!name || !*name)
		return NULL;
	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? ks_strdup(name) : NULL;
	dirs = ks_strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *dir = strtok_r(dirs, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		char *candidate = ks_path_join(*dir ? dir : ".", name);
		struct stat st;

		if (access(candidate, X_OK) == 0 && stat(candidate, &st) == 0 && S_ISREG(st.st_mode))
			found = candidate;
		else
			free(candidate);
	}
	free(dirs);
	return found;
}

static double monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int ks_proc_run(const char *const *argv, const char *out_path, const char *err_path, int timeout_ms,
		const volatile sig_atomic_t *cancel, struct ks_proc_result *res, struct ks_error *err)
{
	int out = -1, errf = -1, exec_pipe[2] = { -1, -1 }, exec_errno = 0, ret = -1;
	double t0 = monotonic_s();
	pid_t pid, parent = getpid();

	memset(res, 0, sizeof(*res));
	out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	errf = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0 || errf < 0) {
		ks_fail(err, "cannot create %s: %s", out < 0 ? out_path : err_path, strerror(errno));
		goto cleanup;
	}
	if (pipe2(exec_pipe, O_CLOEXEC)) {
		ks_fail(err, "cannot create a pipe to run %s: %s", argv[0], strerror(errno));
		goto cleanup;
	}
	pid = fork();
	if (pid < 0) {
		ks_fail(err, "cannot run %s: %s", argv[0], strerror(errno));
		goto cleanup;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(errf, 2) < 0)
			goto child_fail;
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], (char *const *)argv);
	child_fail:
		exec_errno = errno;
		if (write(exec_pipe[1], &exec_errno, sizeof(exec_errno)) < 0)
			_exit(127);
		_exit(127);
	}
	/* the group exists before we might have to kill it */
	setpgid(pid, pid);
	close(exec_pipe[1]);
	exec_pipe[1] = -1;
	while (read(exec_pipe[0], &exec_errno, sizeof(exec_errno)) < 0 && errno == EINTR)
		;
	if (exec_errno) {
		waitpid(pid, NULL, 0);
		ks_fail(err, "cannot run %s: %s", argv[0], strerror(exec_errno));
		goto cleanup;
	}
	for (;;) {
		pid_t r = waitpid(pid, &res->status, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR))
			break;
		if ((timeout_ms > 0 && monotonic_s() - t0 >= timeout_ms / 1000.0) || (cancel && *cancel)) {
			res->timed_out = !(cancel && *cancel);
			res->cancelled = !res->timed_out;
			kill(-pid, SIGKILL);
			while (waitpid(pid, &res->status, 0) < 0 && errno == EINTR)
				;
			break;
		}
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
	/* whatever the program left behind in its group goes with it */
	kill(-pid, SIGKILL);
	res->seconds = monotonic_s() - t0;
	ret = 0;
cleanup:
	if (out >= 0)
		close(out);
	if (errf >= 0)
		close(errf);
	for (int i = 0; i < 2; i++)
		if (exec_pipe[i] >= 0)
			close(exec_pipe[i]);
	return ret;
}

void ks_child_describe_status(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exited with code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, size, "ended with status %d", status);
}

void ks_proc_tool_version(const char *tool, const char *name, char *out, size_t size)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct {
		char program[1024], version[64];
	} cache[4];
	static unsigned next;
	char dir[] = "/tmp/ksearch-version-XXXXXX", *out_path = NULL, *err_path = NULL, *text = NULL, *v;
	const char *argv[] = { tool, "--version", NULL };
	struct ks_proc_result res;
	struct ks_error err;
	size_t len;

	snprintf(out, size, "%s", name);
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < sizeof(cache) / sizeof(cache[0]); i++) {
		if (cache[i].program[0] && !strcmp(cache[i].program, tool)) {
			snprintf(out, size, "%s %s", name, cache[i].version);
			pthread_mutex_unlock(&lock);
			return;
		}
	}
	if (mkdtemp(dir)) {
		out_path = ks_path_join(dir, "version.out");
		err_path = ks_path_join(dir, "version.err");
		if (ks_proc_run(argv, out_path, err_path, 30000, NULL, &res, &err) == 0 &&
		    ks_read_file(out_path, &text, &len, &err) == 0 && (v = strstr(text, "Version "))) {
			unsigned slot = next++ % (sizeof(cache) / sizeof(cache[0]));

			snprintf(cache[slot].program, sizeof(cache[slot].program), "%s", tool);
			snprintf(cache[slot].version, sizeof(cache[slot].version), "%.*s",
				 (int)strcspn(v + 8, " \r\n"), v + 8);
			snprintf(out, size, "%s %s", name, cache[slot].version);
		}
		unlink(out_path);
		unlink(err_path);
		rmdir(dir);
	}
	pthread_mutex_unlock(&lock);
	free(text);
	free(out_path);
	free(err_path);
}
