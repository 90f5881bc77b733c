# The Node.js sandbox image FROM the official image, for machines where a registry answers.
# Same contents as deploy/build-images.sh's Debian-built one: node, TypeScript for the
# no-build-step hooks (/opt/loopsmith/ts-register.mjs, which loads
# /usr/share/nodejs/typescript/lib/typescript.js), the verdict reporter
# (/opt/loopsmith/verdict-reporter.mjs), the quality metrics' ESLint (/opt/loopsmith/metrics,
# from its lock file), libnss-myhostname (`localhost` resolves with the sandbox's empty
# /etc/hosts), a non-root user 10001, /workspace.
#   docker build -f deploy/sandbox-node.Dockerfile -t loopsmith/sandbox-node:local deploy
ARG NODE_IMAGE=node:20-bookworm-slim
FROM ${NODE_IMAGE}
RUN npm install -g typescript@5 \
 && mkdir -p /usr/share/nodejs \
 && ln -s /usr/local/lib/node_modules/typescript /usr/share/nodejs/typescript \
 && (id -u 10001 >/dev/null 2>&1 || useradd --uid 10001 --user-group --create-home --shell /bin/sh sandbox)
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libnss-myhostname \
 && rm -rf /var/lib/apt/lists/* && grep -q '^hosts:.*myhostname' /etc/nsswitch.conf
COPY rootfs/sandbox-node/ts-register.mjs rootfs/sandbox-node/ts-hooks.mjs rootfs/sandbox-node/verdict-reporter.mjs /opt/loopsmith/
COPY rootfs/sandbox-node/metrics/package.json rootfs/sandbox-node/metrics/package-lock.json rootfs/sandbox-node/metrics/eslint.config.mjs /opt/loopsmith/metrics/
RUN npm ci --prefix /opt/loopsmith/metrics --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
WORKDIR /workspace
USER 10001:10001
LABEL org.loopsmith.image=sandbox-node
CMD ["node"]
