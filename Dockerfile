FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY crcr crcr
COPY relay relay
COPY hud hud
COPY api api
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install --no-cache-dir . && python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "-c", "python:crcr.gunicorn_conf", "crcr.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4"]
