# The Python sandbox image FROM the official image, for machines where a registry answers.
# Same contents as deploy/build-images.sh's Debian-built one: python3, pytest, pytest-xdist,
# hypothesis, coverage, pyflakes, mypy, radon and bandit (the quality metrics of `improve`
# without --bench), the verdict plugin (loopsmith_verdict.py), a non-root user 10001, /workspace.
#   docker build -f deploy/sandbox-python.Dockerfile -t loopsmith/sandbox-python:local deploy
ARG PYTHON_IMAGE=python:3.13-slim
FROM ${PYTHON_IMAGE}
RUN pip install --no-cache-dir "pytest>=8,<9" "pytest-xdist>=3" "hypothesis>=6" \
    "coverage>=7" "pyflakes>=3" "mypy>=1.15" "radon>=6" "bandit>=1.7" \
 && useradd --uid 10001 --user-group --create-home --shell /bin/sh sandbox
COPY rootfs/sandbox-python/loopsmith_verdict.py /usr/local/lib/python3.13/site-packages/
ENV PYTHONDONTWRITEBYTECODE=1
WORKDIR /workspace
USER 10001:10001
LABEL org.loopsmith.image=sandbox-python
CMD ["python3"]
