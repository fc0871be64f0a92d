"""Delivery.delivery_id → Delivery.guid: `delivery_id` now means one thing in the code, the
foreign key to a Delivery (Dispatch.delivery_id); the GUID GitHub sends as X-GitHub-Delivery is
`guid`. A column rename: every row and the unique index are kept."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("relay", "0011_h1_dispatch_open_idx")]

    operations = [
        migrations.RenameField(model_name="delivery", old_name="delivery_id", new_name="guid"),
        migrations.AlterField(
            model_name="delivery",
            name="guid",
            field=models.CharField(
                help_text="X-GitHub-Delivery: GitHub's id of this webhook delivery", max_length=100, unique=True
            ),
        ),
    ]
