/* forgehello.c: says hello to a recorder as its agent would, and prints
 * "welcomed" if the recorder sent it a region, else "refused".
 *
 *   forgehello SOCKET PID [fork-of=PPID]
 *
 * SOCKET is an abstract socket name (@...), or "env" for the one in
 * MEMTRAIL_SOCK; PID is the pid the hello names, or "self". With
 * fork-of=PPID, the hello is that of a fork child of process PPID; else
 * that of a new image, of the real parent. The hello has the key of a run
 * only if one is given in MEMTRAIL_FORGED_KEY. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol.h"

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 4 && strncmp(argv[3], "fork-of=", 8) == 0))
		return 2;
	const char *name = argv[1];
	if (strcmp(name, "env") == 0) {
		name = getenv("MEMTRAIL_SOCK");
		if (name == NULL)
			return 2;
#ifdef MT_KEY_LEN
		if (strlen(name) > MT_KEY_LEN && name[MT_KEY_LEN] == ':')
			name += MT_KEY_LEN + 1;
#endif
	}
	size_t len = strlen(name);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (name[0] != '@' || len >= sizeof addr.sun_path)
		return 2;
	memcpy(addr.sun_path + 1, name + 1, len - 1);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0) {
		perror("connect");
		return 1;
	}
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

	char buf[sizeof(struct mt_hello) + 16];
	struct mt_hello h = {.magic = MT_HELLO_MAGIC, .version = MT_PROTOCOL_VERSION, .flags = MT_HELLO_START,
			     .pid = strcmp(argv[2], "self") == 0 ? (uint32_t)getpid() : (uint32_t)atoi(argv[2]),
			     .ppid = (uint32_t)getppid(), .cmdline_len = 7};
#ifdef MT_KEY_LEN
	const char *key = getenv("MEMTRAIL_FORGED_KEY");
	memset(h.key, '0', sizeof h.key);
	if (key != NULL && strlen(key) == MT_KEY_LEN)
		memcpy(h.key, key, MT_KEY_LEN);
#endif
	if (argc == 4) {
		h.flags = MT_HELLO_FORK;
		h.ppid = (uint32_t)atoi(argv[3] + 8);
		h.fork_token = 1;
	}
	memcpy(buf, &h, sizeof h);
	memcpy(buf + sizeof h, "forged", 7);
	if (send(fd, buf, sizeof h + 7, MSG_NOSIGNAL) < 0) {
		printf("refused\n");
		return 0;
	}
	struct mt_welcome w;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof w};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t r = recvmsg(fd, &msg, 0);
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int welcomed = r == (ssize_t)sizeof w && w.status == 0 && c != NULL && c->cmsg_type == SCM_RIGHTS;
	printf("%s\n", welcomed ? "welcomed" : "refused");
	return 0;
}
